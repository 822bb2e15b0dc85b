"""Tokens, the signed auth cookie and the Host allow-list of ``pydsh web`` (spec 12 §2 S1–S5).

Stdlib only: the token is ``secrets.token_urlsafe(32)`` and signs in once; the cookie is
``v1.<base64url(JSON {v, aud, iat, exp})>.<base64url(HMAC-SHA256)>`` keyed by a 32-byte secret in
``$DSH_HOME/web/secret``. Times in the cookie are epoch milliseconds, like every time of the API.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Literal

from pydsh.apps.web.options import host_literal

COOKIE_MAX_AGE_S = 2592000
SECRET_BYTES = 32


def new_token() -> str:
    """A fresh per-start token (S1)."""
    return secrets.token_urlsafe(32)


def token_matches(given: str, token: str) -> bool:
    """Constant-time comparison of a presented token."""
    return hmac.compare_digest(given.encode(errors="surrogatepass"), token.encode())


class SignInToken:
    """The token of the printed URL: it signs in once (S1, S2).

    The first ``GET /?token=`` trades it for the cookie; afterwards it is refused, so a copy left in
    browser history, a terminal log or a shared screen signs nobody in.
    """

    def __init__(self, value: str) -> None:
        self.value = value
        self._used = False

    def redeem(self, given: str) -> Literal["ok", "used", "wrong"]:
        """``ok`` the first time the right token is given, ``used`` after that, else ``wrong``."""
        if not token_matches(given, self.value):
            return "wrong"
        if self._used:
            return "used"
        self._used = True
        return "ok"


def web_dir(home: Path) -> Path:
    """``$DSH_HOME/web``, created 0700."""
    directory = home / "web"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)
    return directory


def load_secret(home: Path) -> bytes:
    """The cookie key: ``$DSH_HOME/web/secret`` (0600), created on first use."""
    path = web_dir(home) / "secret"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    if len(data) == SECRET_BYTES:
        return data
    data = secrets.token_bytes(SECRET_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)
    return data


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class CookieSigner:
    """Mints and checks ``pydsh-auth-<port>`` cookie values."""

    key: bytes
    port: int

    @property
    def name(self) -> str:
        return f"pydsh-auth-{self.port}"

    def _mac(self, signed: str) -> str:
        return _b64(hmac.new(self.key, signed.encode(), sha256).digest())

    def mint(self, aud: str, now_ms: int | None = None) -> str:
        """A cookie value for the validated ``Host`` ``aud``, valid for 30 days."""
        iat = int(time.time() * 1000) if now_ms is None else now_ms
        claims = {"v": 1, "aud": aud, "iat": iat, "exp": iat + COOKIE_MAX_AGE_S * 1000}
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signed = f"v1.{body}"
        return f"{signed}.{self._mac(signed)}"

    def valid(self, value: str, host: str, now_ms: int | None = None) -> bool:
        """Good signature, not expired, and minted for this ``Host`` (S3)."""
        parts = value.split(".")
        if len(parts) != 3 or parts[0] != "v1" or not value.isascii():
            return False
        if not hmac.compare_digest(self._mac(f"v1.{parts[1]}"), parts[2]):
            return False
        try:
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, binascii.Error):
            return False
        if not isinstance(claims, dict) or claims.get("v") != 1:
            return False
        now = int(time.time() * 1000) if now_ms is None else now_ms
        exp = claims.get("exp")
        return isinstance(exp, int) and now < exp and claims.get("aud") == host

    def set_cookie(self, aud: str, secure: bool) -> str:
        """The ``Set-Cookie`` header value of a token exchange (S2)."""
        flags = f"Path=/; HttpOnly; SameSite=Strict; Max-Age={COOKIE_MAX_AGE_S}"
        return f"{self.name}={self.mint(aud)}; {flags}" + ("; Secure" if secure else "")


def allowed_hosts(host: str, port: int, trusted: tuple[str, ...]) -> frozenset[str]:
    """``Host`` header values the DNS-rebinding guard accepts (S5), lower-case.

    A ``--trusted-host`` value is taken as given and also with the port appended.
    """
    names = {host_literal(host), "localhost", "127.0.0.1", "[::1]"}
    out = {f"{name}:{port}".lower() for name in names}
    for name in trusted:
        out.add(name.lower())
        if not name.endswith(f":{port}"):
            out.add(f"{name}:{port}".lower())
    return frozenset(out)
