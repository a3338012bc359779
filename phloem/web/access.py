"""Who may read the web view: the listen address, the bearer token, and the check every
request goes through.

A loopback address (`127.0.0.0/8`, `::1`, `localhost`) serves this machine only; then
the `Host` header must name a loopback host too, so a page elsewhere cannot reach the
view through DNS rebinding. Any other address must be named in the config or on the
command line, and needs a token read from an environment variable (never from the
config file): every request must then carry it, as `Authorization: Bearer TOKEN` or as
the cookie the login form sets, wherever it comes from. A request without it is a 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass

from phloem.protocols.errors import ErrorKind, PhloemError
from phloem.protocols.limits import check_range

COOKIE_NAME = "phloem_web"
MIN_TOKEN_CHARS = 16  # a shorter token is refused at start: it could be guessed
MAX_TOKEN_CHARS = 4096
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def parse_listen(text: str, what: str = "web") -> tuple[str, int]:
    """`HOST:PORT` (`[::1]:PORT` for IPv6) → `(host, port)`; `config_invalid` if bad.
    `what` names the server in messages (`web`, `api`)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise PhloemError(ErrorKind.CONFIG_INVALID, f"{what} listen {text!r}: expected HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    port = check_range(
        f"{what} listen port", int(port_text), 0, 65_535, kind=ErrorKind.CONFIG_INVALID
    )
    return host, port


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host part of a `Host` header (`[::1]:8765` → `::1`)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class Access:
    """The rule for one server: loopback-only (no token) or token-on-every-request."""

    loopback: bool
    token: str | None = None

    @classmethod
    def for_listen(cls, host: str, token_env: str, what: str = "web") -> Access:
        """Loopback hosts need no token; any other needs `$token_env` (else refused)."""
        if is_loopback(host):
            return cls(loopback=True)
        token = os.environ.get(token_env, "")
        if not token:
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"{what} listen {host!r} is not loopback: set a token in ${token_env} "
                "(every request must then carry it)",
            )
        if not MIN_TOKEN_CHARS <= len(token) <= MAX_TOKEN_CHARS:
            raise PhloemError(
                ErrorKind.CONFIG_INVALID,
                f"${token_env} must be {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} characters",
            )
        return cls(loopback=False, token=token)

    def token_matches(self, presented: str | None) -> bool:
        """A constant-time comparison with the configured token."""
        if self.token is None or not presented or len(presented) > MAX_TOKEN_CHARS:
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())

    def refusal(self, host_header: str, authorization: str, cookie: str | None) -> int:
        """0 if one request may be answered, else its HTTP status: 403 for a loopback
        server asked under another host name, 401 for a request without the token."""
        if self.loopback:
            return 0 if is_loopback(_host_name(host_header)) else 403
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() == "bearer" and self.token_matches(credential.strip()):
            return 0
        return 0 if self.token_matches(cookie) else 401
