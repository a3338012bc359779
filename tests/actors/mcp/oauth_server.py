"""A streamable-HTTP MCP server behind OAuth, built with the official SDK's auth helpers.

    python -m tests.actors.mcp.oauth_server PORT [--expires SECONDS]

One process is both the authorization server (the SDK's `/authorize`, `/token`,
`/register` and metadata routes over `Provider`) and the protected resource at `/mcp`
(its bearer check). `Provider` keeps everything in memory and approves every
authorization at once (redirecting straight back with a code), standing in for a person
who clicks "allow". Every token it issues starts with `CANARY-`, so a test can search
any output for it. Tools: `whoami()` (the client id the token was issued to), `add(a, b)`.
"""

from __future__ import annotations

import logging
import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

CANARY = "CANARY-"


class Provider:
    """An in-memory authorization server that approves every request."""

    def __init__(self, expires_s: int) -> None:
        self.expires_s = expires_s
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access = CANARY + "access-" + secrets.token_hex(16)
        refresh = CANARY + "refresh-" + secrets.token_hex(16)
        expires = int(time.time()) + self.expires_s
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            expires_in=self.expires_s,
            scope=" ".join(scopes) or None,
            refresh_token=refresh,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(authorization_code.client_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def build(port: int, expires_s: int) -> MCPServer:
    logging.disable(logging.WARNING)
    base = f"http://127.0.0.1:{port}"
    server = MCPServer(
        "phloem-oauth-test",
        auth_server_provider=Provider(expires_s),
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=False,
        ),
        log_level="WARNING",
    )

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return server


def main(argv: list[str]) -> None:
    port = int(argv[0])
    expires = int(argv[argv.index("--expires") + 1]) if "--expires" in argv else 3600
    build(port, expires).run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    main(sys.argv[1:])
