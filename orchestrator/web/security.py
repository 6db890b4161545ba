"""Who may use the pages, and the headers every answer carries.

- Authentication: HTTP Basic against a users file of argon2 hashes
  (`name:$argon2id$...` a line), or a shared token (Basic password or
  `Authorization: Bearer`). The authenticated name is the approval's actor.
  Without either, `serve` binds loopback only (see `command.py`).
- CSRF: a token signed by a per-process key, in a SameSite=Strict cookie
  that every form posts back (signed double submit); a POST without it, with
  a cookie we did not sign, or from another origin (`Origin`, including
  `null`, or `Sec-Fetch-Site`) is refused.
- Headers: a Content-Security-Policy that allows no script at all, plus
  nosniff, no framing and no referrer to other sites (`same-origin`: with
  `no-referrer` a browser posts our own forms with `Origin: null`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from orchestrator.domain.actor import actor_problem
from orchestrator.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CSRF_COOKIE = "orch_csrf"
ACCESS_COOKIE = "orch_access"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    # The task page's live tail: our one script file, and its event stream.
    "script-src 'self'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
OPEN_PATHS = ("/healthz",)


def hash_password(password: str) -> str:
    return PasswordHasher().hash(password)


def read_users(path: Path) -> dict[str, str]:
    """`name:hash` lines; blank lines and `#` comments are skipped."""
    users: dict[str, str] = {}
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the users file ({exc.strerror})") from exc
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, hashed = line.partition(":")
        if not sep or not name or not hashed.startswith("$argon2"):
            raise ConfigError(f"{path}:{number}: expected `name:$argon2...` (a hashed password)")
        problem = actor_problem(name)
        if problem is not None:
            raise ConfigError(f"{path}:{number}: the user name {problem}")
        users[name] = hashed
    if not users:
        raise ConfigError(f"{path}: no users in the users file")
    return users


def set_user(path: Path, name: str, hashed: str) -> None:
    """Add or replace `name`'s line, keeping the others; written atomically, 0600."""
    if not name or ":" in name or any(c.isspace() for c in name):
        raise ConfigError(f"user name {name!r}: no colon or spaces")
    problem = actor_problem(name)
    if problem is not None:
        raise ConfigError(f"user name {name[:40]!a}: {problem}")
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    kept = [line for line in lines if line.partition(":")[0].strip() != name]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join([*kept, f"{name}:{hashed}"]) + "\n", "utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)


@dataclass
class Auth:
    users: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    local_actor: str = "web"  # the actor when no authentication is configured
    local_token: str | None = None  # without users or token: the access token loopback needs
    _verified: set[tuple[str, str]] = field(default_factory=set)  # (name, sha256 of password)

    @property
    def required(self) -> bool:
        return bool(self.users) or bool(self.token)

    def actor(self, authorization: str | None) -> str | None:
        """The authenticated name, or None to answer 401."""
        if not self.required:
            return self.local_actor
        if not authorization:
            return None
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer":
            return "token" if self._token_ok(value.strip()) else None
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(value.strip()).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if name and actor_problem(name) is not None:
            return None  # no name the history could hold (NUL, 10,000 characters)
        # The token never speaks for a users-file name: its holder would approve
        # as "alice" without alice's password.
        if name not in self.users and self._token_ok(password):
            return name or "token"
        return name if self._password_ok(name, password) else None

    def _token_ok(self, given: str) -> bool:
        return _same(given, self.token)

    def local_ok(self, given: str | None) -> bool:
        """`given` is the local access token (always false when there is none)."""
        return given is not None and _same(given, self.local_token)

    def _password_ok(self, name: str, password: str) -> bool:
        hashed = self.users.get(name)
        if hashed is None:
            return False
        key = (name, hashlib.sha256(password.encode()).hexdigest())
        if key in self._verified:  # argon2 costs ~50 ms: once per password, not per page
            return True
        try:
            PasswordHasher().verify(hashed, password)
        except (VerificationError, InvalidHashError):
            return False
        self._verified.add(key)
        return True


def _same(given: str, token: str | None) -> bool:
    """Bytes, not str: compare_digest raises on a non-ASCII str (a 500)."""
    if token is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode())


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


CSRF_KEY = secrets.token_bytes(32)  # per process: a restart asks for a reload


def new_csrf_token(key: bytes = CSRF_KEY) -> str:
    nonce = secrets.token_urlsafe(24)
    return f"{nonce}.{_sign(key, nonce)}"


def _sign(key: bytes, nonce: str) -> str:
    return hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()


def _signed(token: str, key: bytes) -> bool:
    nonce, _, mac = token.partition(".")
    return bool(nonce) and hmac.compare_digest(_sign(key, nonce).encode(), mac.encode())


def _cookie(scope: Scope, name: str) -> str | None:
    raw = _header(scope, b"cookie")
    if not raw:
        return None
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(raw)
    except Exception:  # a malformed Cookie header is just no cookie
        return None
    morsel = cookie.get(name)
    return None if morsel is None else morsel.value


def csrf_cookie(scope: Scope, key: bytes = CSRF_KEY) -> str | None:
    """The cookie's token when this server signed it. Another port on the same
    host can set our cookie (cookies ignore ports), but cannot sign one."""
    value = _cookie(scope, CSRF_COOKIE)
    return value if value is not None and _signed(value, key) else None


def access_cookie_name(scope: Scope) -> str:
    """The local token's cookie, named by our port: cookies ignore ports, and
    two `serve`s on one host must not overwrite each other's."""
    server = scope.get("server") or ("", 0)
    return f"{ACCESS_COOKIE}_{server[1]}"


def _local_access(scope: Scope, auth: Auth) -> str | None:
    """How a request shows the local access token: "cookie", "query" (the
    address `serve` printed, to be traded for the cookie), or None (403)."""
    if auth.local_ok(_cookie(scope, access_cookie_name(scope))):
        return "cookie"
    scheme, _, value = (_header(scope, b"authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and auth.local_ok(value.strip()):
        return "cookie"
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    if any(auth.local_ok(given) for given in query.get("token", [])):
        return "query"
    return None


def csrf_ok(scope: Scope, posted: str | None, key: bytes = CSRF_KEY) -> bool:
    """A signed cookie token, the same token in the form, and a same-origin post.

    A browser says where a request comes from: `Sec-Fetch-Site` (other than
    same-origin, or none for a typed URL) and an `Origin` of another host, or
    `null` (what a form redirected from another site sends) unless
    Sec-Fetch-Site vouches for it, are refused. A client that sends neither
    (curl, a script) is judged by the signed token alone."""
    expected = csrf_cookie(scope, key)
    if not expected or not posted:
        return False
    if not hmac.compare_digest(expected.encode(), posted.encode("utf-8", "surrogateescape")):
        return False
    site = (_header(scope, b"sec-fetch-site") or "").strip().lower()
    if site and site not in ("same-origin", "none"):
        return False
    origin, host = _header(scope, b"origin"), _header(scope, b"host")
    if origin is None:
        return True
    if origin.strip().lower() == "null":  # a redirect or a sandbox; or a no-referrer page
        return site == "same-origin"
    return bool(host) and origin.split("://", 1)[-1] == host


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def loopback_host(host: str) -> bool:
    """A loopback name, or any loopback address literal (`serve --host
    127.0.0.2` is one). A literal cannot be rebound by DNS, so answering to
    it gives a rebinding page nothing."""
    if host in LOOPBACK_NAMES:
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(scope: Scope) -> str:
    """The Host header without its port ("[::1]:8765" -> "[::1]")."""
    host = (_header(scope, b"host") or "").strip().lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware: authentication, the CSRF cookie and the headers.

    Without authentication (loopback only) the Host header must be a loopback
    name too: else a web page whose DNS name rebinds to 127.0.0.1 would be
    same-origin with us, able to read a gate and post its form."""

    def __init__(self, app: ASGIApp, auth: Auth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.auth.required and not loopback_host(host_name(scope)):
            await _plain(send, 421, b"this server answers only to 127.0.0.1 or localhost\n")
            return
        if self.auth.local_token is not None and scope["path"] not in OPEN_PATHS:
            shown = _local_access(scope, self.auth)
            if shown is None:
                await _plain(send, 403, NO_ACCESS)
                return
            if shown == "query":
                await _trade_for_cookie(scope, send, self.auth.local_token)
                return
        actor = self.auth.actor(_header(scope, b"authorization"))
        if actor is None and scope["path"] not in OPEN_PATHS:
            await _unauthorized(send)
            return
        scope.setdefault("state", {})["actor"] = actor
        token = csrf_cookie(scope)
        fresh = token is None
        token = token or new_csrf_token()
        scope["state"]["csrf"] = token

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.extend(HEADERS)
                if fresh:
                    cookie = f"{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                    headers.append((b"set-cookie", cookie.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


NO_ACCESS = (
    b"forbidden: this server needs its access token; open the address `orchestrator serve` "
    b"printed (it ends in ?token=...), or read the web-token file in the state folder\n"
)


async def _trade_for_cookie(scope: Scope, send: Send, token: str) -> None:
    """The printed address's token, traded for a cookie: a redirect to the
    same page without it, so it stays out of the history and the Referer."""
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    query.pop("token", None)
    rest = urlencode(query, doseq=True)
    # One leading slash: `//host/` would send the browser to another site.
    location = "/" + quote(scope["path"].lstrip("/\\")) + (f"?{rest}" if rest else "")
    cookie = f"{access_cookie_name(scope)}={token}; Path=/; HttpOnly; SameSite=Strict"
    extra = [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())]
    await _plain(send, 303, b"signed in\n", extra)


async def _unauthorized(send: Send) -> None:
    challenge = (b"www-authenticate", b'Basic realm="orchestrator", charset="UTF-8"')
    await _plain(send, 401, b"authentication required\n", [challenge])


async def _plain(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [
        *(extra or []),
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
