"""OAuth for streamable-HTTP MCP servers: the SDK's client flow, tokens kept 0600.

A server with `oauth = true` is authorized by the official SDK's `OAuthClientProvider`
(protected-resource and authorization-server discovery, dynamic client registration,
the authorization-code grant with PKCE, refresh). phloem adds only where its results
live and who takes part in the flow:

- `TokenFile`: the tokens and the registered client of one server in one JSON file,
  `McpConfig.oauth_path(NAME)` (mode 0600 in a 0700 directory, replaced atomically, read
  bounded by `MAX_TOKEN_FILE_BYTES`). The file records when the access token expires, so
  a token read back later is known expired (and refreshed) rather than sent blindly.
- `login` (`phloem mcp login NAME`): the one flow that needs a person. A loopback
  listener on 127.0.0.1 takes the authorization server's redirect; the URL to open is
  handed to `show`; the flow waits at most `LOGIN_TIMEOUT_S`.
- `daemon_provider`: what the hub connects with. It uses the stored tokens and refreshes
  them; a flow needing a person (no tokens, refresh refused) fails at once with
  `LoginNeeded` ("run `phloem mcp login NAME`") instead of waiting for a browser.

Tokens exist only in that file, in memory and in the `Authorization` header the SDK sets.
They are never logged; errors about a server pass through `protocols.secrets.redact`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from phloem.actors.mcp.settings import McpServerConfig
from phloem.base.logs import get_logger
from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.files import read_bounded

log = get_logger("phloem.mcp.oauth")

MAX_TOKEN_FILE_BYTES = 64 * 1024
"""Largest token file read (tokens plus the registered client)."""
LOGIN_TIMEOUT_S = 300.0
"""How long `phloem mcp login` waits for the authorization server's redirect."""
CALLBACK_PATH = "/callback"
CLIENT_NAME = "phloem"
DAEMON_REDIRECT = "http://127.0.0.1/callback"
"""The redirect URI the daemon's provider names (it never takes a redirect itself)."""


class LoginNeeded(Exception):
    """A server's OAuth flow needs a person: `phloem mcp login NAME` first."""

    def __init__(self, server: str) -> None:
        super().__init__(f"MCP server {server} needs an OAuth login (`phloem mcp login {server}`)")


class TokenFile:
    """The SDK's `TokenStorage` over one 0600 JSON file; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def has_tokens(self) -> bool:
        """True when tokens are stored (valid or not: the SDK refreshes expired ones)."""
        return isinstance(self._read().get("tokens"), dict)

    def clear(self) -> None:
        """Forget the tokens and the registered client (a new login starts clean)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def _read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        try:
            data = json.loads(read_bounded(self.path, MAX_TOKEN_FILE_BYTES, ErrorKind.BAD_MESSAGE))
        except (PhloemError, ValueError):
            log.warning("mcp_oauth_file_unreadable", path=str(self.path))
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, json.dumps(data).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)

    async def get_tokens(self) -> OAuthToken | None:
        stored = self._read().get("tokens")
        if not isinstance(stored, dict):
            return None
        try:
            tokens = OAuthToken.model_validate(stored.get("token", {}))
        except ValueError:
            return None
        expires_at = stored.get("expires_at")
        if isinstance(expires_at, int | float):  # what is left of its lifetime (0: expired)
            tokens.expires_in = max(0, int(expires_at - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._read()
        expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        data["tokens"] = {
            "token": tokens.model_dump(mode="json", exclude_none=True),
            "expires_at": expires_at,
        }
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        stored = self._read().get("client")
        if not isinstance(stored, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(stored)
        except ValueError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)


def _metadata(cfg: McpServerConfig, redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=cfg.oauth_scope or None,
    )


class _Provider(OAuthClientProvider):
    """The SDK's provider, except that tokens read from storage get their expiry: the SDK
    learns an expiry only from a token response, so a stored token that has expired would
    be sent (and refused) instead of refreshed."""

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.context.current_tokens is not None:
            self.context.update_token_expiry(self.context.current_tokens)


def provider(
    cfg: McpServerConfig,
    path: Path,
    redirect_uri: str,
    redirect: Callable[[str], Awaitable[None]],
    callback: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> OAuthClientProvider:
    """The SDK's OAuth client provider for `cfg.url`, its tokens in `path`."""
    return _Provider(cfg.url, _metadata(cfg, redirect_uri), TokenFile(path), redirect, callback)


def daemon_provider(name: str, cfg: McpServerConfig, path: Path) -> OAuthClientProvider:
    """The provider the hub connects with: stored tokens, refreshed; `LoginNeeded` where
    the flow would need a person — at once when no tokens are stored (nothing is sent,
    no client registered)."""
    if not TokenFile(path).has_tokens():
        raise LoginNeeded(name)

    async def refuse(_url: str = "") -> Any:
        raise LoginNeeded(name)

    return provider(cfg, path, DAEMON_REDIRECT, refuse, refuse)


async def login(
    name: str,
    cfg: McpServerConfig,
    path: Path,
    show: Callable[[str], None],
    timeout: float = LOGIN_TIMEOUT_S,
) -> list[str]:
    """Authorize phloem at server `name` (see the module docstring); `show` is given the
    URL to open. Starts clean: tokens and client stored before are forgotten (the client is
    registered again, with this login's redirect URI). The server's tool names once
    connected."""
    from aiohttp import web  # the loopback listener (imported only by the login command)

    TokenFile(path).clear()
    answer: dict[str, AuthorizationCodeResult] = {}
    arrived = anyio.Event()

    async def on_callback(request: Any) -> Any:
        query = request.query
        if "code" not in query:
            error = query.get("error", "no code")[:200]
            raise web.HTTPBadRequest(text=f"authorization failed: {error}")
        answer["code"] = AuthorizationCodeResult(code=query["code"], state=query.get("state"))
        arrived.set()
        return web.Response(text="phloem is authorized; you can close this page.")

    app = web.Application()
    app.router.add_get(CALLBACK_PATH, on_callback)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    redirect_uri = f"http://127.0.0.1:{port}{CALLBACK_PATH}"

    async def redirect(url: str) -> None:
        show(url)

    async def callback() -> AuthorizationCodeResult:
        with anyio.fail_after(timeout):
            await arrived.wait()
        return answer["code"]

    auth = provider(cfg, path, redirect_uri, redirect, callback)
    try:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(cfg.connect_timeout_s)) as http,
            streamable_http_client(cfg.url, http_client=http) as (read, write),
            ClientSession(read, write, cfg.connect_timeout_s) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            return [tool.name for tool in listed.tools]
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()
