"""The ASGI guard in front of every route (spec 12 §2 S4–S6, S10).

In order: a control character in the path (400), the DNS-rebinding ``Host`` check (421), the
content-type and ``Origin`` checks of writes (403), the cookie on ``/api/*`` (401), a declared length
over 2 MB (413; the routes cap what they read too); then the body deadline on ``receive`` and on
every response the security headers. Errors are the API's one-line JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pydsh.apps.web.auth import CookieSigner
from pydsh.apps.web.errors import error_body
from pydsh.apps.web.limits import Throttle

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 2 * 1024 * 1024
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def cookie(scope: Scope, name: str) -> str | None:
    raw = header(scope, b"cookie")
    if raw is None:
        return None
    for part in raw.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class Guard:
    """Wraps the app; knows the allowed ``Host`` values and the cookie signer."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], signer: CookieSigner, throttle: Throttle) -> None:
        self.app = app
        self.hosts = hosts
        self.signer = signer
        self.throttle = throttle

    def authorized(self, scope: Scope) -> bool:
        """A valid cookie minted for this request's ``Host``."""
        value = cookie(scope, self.signer.name)
        host = (header(scope, b"host") or "").lower()
        return value is not None and self.signer.valid(value, host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        api = path.startswith("/api/")
        refusal = self._refusal(scope, path)
        secured = _secured(send, api)
        if refusal is not None:
            await _json(secured, *refusal)
            return
        length = header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY:
            await _json(secured, 413, "body_too_large", "The request body is larger than 2 MB.")
            return
        await self.app(scope, self.throttle.body_deadline(scope, receive), secured)

    def _refusal(self, scope: Scope, path: str) -> tuple[int, str, str] | None:
        if CONTROL.search(path):
            return 400, "invalid_path", "The request path contains a control character."
        host = (header(scope, b"host") or "").lower()
        if host not in self.hosts:
            return 421, "misdirected_request", "This server does not answer for that Host name."
        if scope.get("method") in WRITES:
            ctype = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return 403, "bad_content_type", "Requests that change state must be sent as application/json."
            origin = header(scope, b"origin")
            served = f"{scope.get('scheme', 'http')}://{host}"
            if origin is not None and origin.lower() != served:
                return 403, "bad_origin", "Requests from another origin are refused."
        if path.startswith("/api/") and not self.authorized(scope):
            return 401, "unauthorized", "Open the URL printed by pydsh web to sign in."
        return None


def _secured(send: Send, api: bool) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [h for h in message.get("headers", []) if h[0].lower() != b"cache-control" or not api]
            headers += SECURITY_HEADERS
            if api:
                headers.append((b"cache-control", b"no-store"))
            message["headers"] = headers
        await send(message)

    return wrapped


async def _json(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps(error_body(code, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
