"""HTTP plumbing shared by the model adapters: credentials, headers, client, errors (spec 04 §4.1–§4.12, §5.6).

``httpx`` is imported inside the functions that need it, never at module import, so composing a
profile that merely mentions an HTTP adapter costs nothing until the first call.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from pydsh import __version__
from pydsh.kernel.cancel import AbortError, AbortSignal
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.profiles import private_dir
from pydsh.kernel.text import utf8
from pydsh.llm.types import LlmError

if TYPE_CHECKING:
    import ssl

    import httpx

USER_AGENT = f"pydsh/{__version__}"
"""Product token only: the project publishes no URL to put in the ``(+<project URL>)`` comment."""

_QUOTA = (
    r"\binsufficient[\s_-]+(quota|balance|credits?)\b",
    r"\b(quota|usage[\s_-]+limit)[\s_-]+(exceeded|exhausted|reached)\b",
    r"\bexceed(ed|s)?[\s_-]+((your|the)[\s_-]+)?(current[\s_-]+)?quota\b",
    r"\b(balance|credits?)[\s_-]+(exhausted|depleted)\b",
    r"\bout[\s_-]+of[\s_-]+(credits?|budget)\b",
)
_OVERFLOW = (
    r"(^|[^a-z0-9])context[\s_-](length|window)[\s_-](exceed(ed|s)?|overflow(ed)?|limit[\s_-]exceeded)($|[^a-z0-9])",
    r"\b(maximum|max)(\s+(allowed|supported))?\s+context\s+(length|window)\b",
    r"\b(request|prompt|input|messages?)\s+(is\s+|are\s+)?too\s+(large|long)\s+for\s+((this|the)\s+)?"
    r"(model('s)?\s+)?context(\s+window)?\b",
    r"\b(input|prompt|request)\s+(is\s+)?too\s+(long|large)\s+for\s+(this|the)\s+model\b",
    r"\b(input|prompt|request|messages?)\b.{0,40}\b(exceed(s|ed)?|overflows?|is\s+larger\s+than)\b.{0,40}\b"
    r"(the\s+)?(model('s)?\s+)?context(\s+(length|window))?\b",
)
"""Error wording patterns, matched case-insensitively; ``re`` compiles them on first use, not at import."""


def is_quota(detail: str) -> bool:
    """Quota-exhaustion wording (shared by both adapters)."""
    return any(re.search(p, detail, re.IGNORECASE) for p in _QUOTA)


def is_overflow(detail: str) -> bool:
    """Context-overflow wording (shared by both adapters)."""
    return any(re.search(p, detail, re.IGNORECASE) for p in _OVERFLOW)


# -- configuration helpers -------------------------------------------------------------------


def check_base_url(url: str) -> str:
    """``url`` if it is an http(s) URL without credentials, query or fragment, else ``ValueError``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"baseURL {url!r} must be an http or https URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("baseURL must not carry credentials")
    if parts.query or parts.fragment:
        raise ValueError("baseURL must not carry a query or fragment")
    return url


def api_key(provider: str, env_name: str | None, *, required: bool) -> str | None:
    """The key for ``provider``: ``$<env_name>``, else ``$DSH_HOME/credentials.json``; checked for header safety."""
    key = (os.environ.get(env_name) or "").strip() if env_name else ""
    if not key:
        key = _stored_key(provider)
    if not key:
        if not required:
            return None
        raise LlmError(
            f'no API key for provider route "{provider}"; export {env_name} in the launching environment',
            "MISSING_CREDENTIAL",
        )
    if any(not (" " <= ch <= "~") and ch != "\t" for ch in key):
        raise LlmError(
            f'the API key for provider route "{provider}" contains characters an HTTP header cannot carry',
            "INVALID_CREDENTIAL",
        )
    return key


def _stored_key(provider: str) -> str:
    try:
        stored = json.loads((dsh_home() / "credentials.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    value = stored.get(provider) if isinstance(stored, dict) else None
    return value.strip() if isinstance(value, str) else ""


def anonymous_user_id() -> str | None:
    """The install's anonymous id from ``$DSH_HOME/.anonymous-user-id`` (created on first use, mode 0600)."""
    path: Path = dsh_home() / ".anonymous-user-id"
    try:
        value = path.read_text(encoding="utf-8").strip()
        if value:
            return value
    except OSError:
        pass
    import uuid

    value = str(uuid.uuid4())
    try:
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(value)
    except OSError:
        return None
    return value


def header_safe(value: str) -> str:
    """``value`` as is when it is printable ASCII, else percent-encoded UTF-8 (HTTP headers carry ASCII only)."""
    if value.isascii() and value.isprintable():
        return value
    return quote(value, safe="", errors="surrogatepass")


def harness_headers(options: Mapping[str, Any], user_id: str | None) -> dict[str, str]:
    """The ``x-deepseek-harness-*`` attribution headers of one call."""
    headers: dict[str, str] = {}
    if user_id:
        headers["x-deepseek-harness-user-id"] = user_id
    if options.get("sessionId"):
        headers["x-deepseek-harness-session-id"] = header_safe(str(options["sessionId"]))
    if options.get("purpose") == "compaction":
        headers["x-deepseek-harness-compact"] = "1"
    return headers


def make_client(
    connect_ms: float, idle_ms: float, urls: Iterable[str], transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """One pooled HTTP/1.1 client: no redirects, proxies from the environment, idle read timeout, and no cap on
    connections: one process may host hundreds of agents calling models at once (httpx's default of 100
    connections, 20 kept alive, queued the rest until its pool timeout and closed most connections after use).

    When every URL it will reach is plain ``http://`` and no proxy is configured, no TLS can
    happen, so the CA bundle is not loaded (about 90 ms off the first call to a local server).
    A given ``transport`` (for example ``httpx.MockTransport`` in tests) carries every request.
    """
    import httpx

    timeout = httpx.Timeout(connect=connect_ms / 1000, read=idle_ms / 1000, write=30.0, pool=30.0)
    proxied = any(name.lower().endswith("_proxy") for name in os.environ)
    plain = transport is not None or (not proxied and all(url.startswith("http://") for url in urls))
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    verify: ssl.SSLContext | bool = False if plain else tls_context()
    return cookieless()(
        timeout=timeout, follow_redirects=False, trust_env=True, verify=verify, transport=transport, limits=limits
    )


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of the process (CA bundle from the environment as httpx finds it): loading the
    bundle takes about 90 ms, and each of an adapter's ``SHARDS`` pools would load its own."""
    import httpx

    return httpx.create_ssl_context(trust_env=True)


@functools.cache
def cookieless() -> type[httpx.AsyncClient]:
    """``httpx.AsyncClient`` without a cookie jar: the reference's ``fetch`` keeps no cookies either, and httpx
    parsed every response's headers into one through ``http.cookiejar`` (about 50 µs a model call)."""
    import httpx

    class NoCookies(httpx.Cookies):
        def extract_cookies(self, response: httpx.Response) -> None:
            """Keep nothing."""

    none = NoCookies()

    class CookielessClient(httpx.AsyncClient):
        @property
        def cookies(self) -> httpx.Cookies:
            return none

        @cookies.setter
        def cookies(self, value: Any) -> None:
            """Nothing to set."""

    return CookielessClient


@functools.cache
def parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once: httpx parses a URL given as text at every request (about half of building one)."""
    import httpx

    return httpx.URL(url)


SHARDS = 64
"""Connection pools per client: each session's calls go to one of them."""


class Clients:
    """The adapter's HTTP clients, a session's calls always on the same one. httpcore scans every connection of
    a pool at each request and each release, so one pool serving hundreds of concurrent calls cost time
    quadratic in them (half the CPU with 500 agents); a few pools keep each one small."""

    def __init__(self, make: Callable[[], httpx.AsyncClient]) -> None:
        self._make = make
        self._pools: dict[int, httpx.AsyncClient] = {}

    def get(self, session: object) -> httpx.AsyncClient:
        shard = hash(session) % SHARDS if session else 0
        client = self._pools.get(shard)
        if client is None:
            client = self._pools[shard] = self._make()
        return client

    async def aclose(self) -> None:
        """Close every pool."""
        pools, self._pools = list(self._pools.values()), {}
        for client in pools:
            await client.aclose()


def compact_json(value: Any) -> str:
    """The compact JSON text of request bodies (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Encoded(list[Any]):
    """A list whose compact JSON is already known: a session's history, mostly encoded at earlier steps."""

    __slots__ = ("json",)

    def __init__(self, items: list[Any], text: str) -> None:
        super().__init__(items)
        self.json = text


def encoded(items: list[Any]) -> Encoded:
    return Encoded(items, compact_json(items))


def encode_body(body: dict[str, Any]) -> bytes:
    """Compact JSON bytes with the body's key order, :class:`Encoded` members written as they are; never fails
    on text (unpaired surrogates, which a log written before they were replaced at the boundary may hold, go
    out as U+FFFD)."""
    members = (f"{compact_json(k)}:{v.json if type(v) is Encoded else compact_json(v)}" for k, v in body.items())
    return utf8("{" + ",".join(members) + "}")


# -- transport -------------------------------------------------------------------------------


def transport_error(exc: BaseException, prefix: str) -> LlmError:
    """The ``LlmError`` of an httpx failure (idle timeout or transport)."""
    import httpx

    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        error = LlmError(f"{prefix} stream idle timeout", "TIMEOUT")
    else:
        error = LlmError(f"{prefix} transport failed", "TRANSPORT")
    error.__cause__ = exc
    return error


async def send(client: httpx.AsyncClient, request: httpx.Request, signal: AbortSignal, prefix: str) -> httpx.Response:
    """Send ``request`` streaming; abort, timeouts and transport failures become ``LlmError``."""
    import httpx

    try:
        async with signal.scope():
            return await client.send(request, stream=True)
    except AbortError:
        raise LlmError(f"{prefix} request aborted", "ABORTED") from None
    except httpx.HTTPError as exc:
        raise transport_error(exc, prefix) from exc


Classifier = Callable[[int | None, tuple[str | None, str | None, str | None], Mapping[str, str] | None], LlmError]


@asynccontextmanager
async def opened(
    client: httpx.AsyncClient, request: httpx.Request, signal: AbortSignal, prefix: str, classify: Classifier
) -> AsyncIterator[httpx.Response]:
    """Send ``request`` and yield its checked streaming response: redirects are refused, non-2xx
    answers classified, empty bodies reported; failures carry the request id; always closed."""
    response = await send(client, request, signal, prefix)
    rid = request_id(response.headers)
    try:
        status = response.status_code
        if 300 <= status < 400:
            raise LlmError(f"{prefix} refused a redirect", "TRANSPORT", status=status)
        if not 200 <= status < 300:
            raise classify(status, error_fields(await read_text(response, signal, prefix)), response.headers)
        if has_no_body(response):
            raise LlmError(f"{prefix} returned no response body", "EMPTY_RESPONSE")
        yield response
    except LlmError as exc:
        if exc.request_id is None:
            exc.request_id = rid
        raise
    finally:
        await response.aclose()
        _unbind(response)


def _unbind(response: httpx.Response) -> None:
    """Drop a closed response's stream: httpx binds the two to each other, and without the cycle reference
    counting frees the response (its request, headers and buffers) at once instead of the cyclic collector."""
    import httpx

    response.stream = httpx.ByteStream(b"")


async def read_text(response: httpx.Response, signal: AbortSignal, prefix: str) -> str:
    """The whole (error) body as text, guarded like :func:`send`."""
    import httpx

    try:
        async with signal.scope():
            raw = await response.aread()
    except AbortError:
        raise LlmError(f"{prefix} request aborted", "ABORTED") from None
    except httpx.HTTPError as exc:
        raise transport_error(exc, prefix) from exc
    return raw.decode("utf-8", "replace")


def has_no_body(response: httpx.Response) -> bool:
    """A 2xx answer that announces no body at all."""
    return response.status_code in (204, 205) or response.headers.get("content-length") == "0"


# -- errors ----------------------------------------------------------------------------------


def retry_after_ms(value: str | None) -> float | None:
    """``Retry-After`` (seconds or HTTP date) in ms when finite and positive."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    ms = seconds * 1000
    if not math.isfinite(ms) or ms <= 0:
        return None
    return int(ms) if ms == int(ms) else ms


def request_id(headers: Mapping[str, str]) -> str | None:
    """The provider's request id header, if any."""
    for name in ("request-id", "x-request-id", "x-deepseek-request-id"):
        value = headers.get(name)
        if value:
            return value
    return None


def error_fields(text: str) -> tuple[str | None, str | None, str | None]:
    """``(type, code, message)`` of an error body in either dialect (any shape tolerated)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None, None, None
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, dict):
        return None, None, None
    kind, code, message = error.get("type"), error.get("code"), error.get("message")
    return (
        kind if isinstance(kind, str) else None,
        str(code) if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else None,
    )


def _detail(kind: str | None, code: str | None, message: str) -> str:
    return " ".join(part for part in (kind, code, message) if part)


def messages_error(
    status: int | None, error: tuple[str | None, str | None, str | None], headers: Mapping[str, str] | None = None
) -> LlmError:
    """Classify an Anthropic-Messages error (HTTP or in-band) in the order of spec 04 §4.11."""
    kind, code_field, message = error
    message = message if message is not None else f"DeepSeek Messages request failed ({status})"
    detail = _detail(kind, code_field, message)
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        code = "AUTH"
    elif is_quota(detail) or status == 402:
        code = "QUOTA"
    elif status == 429 or kind == "rate_limit_error":
        code = "RATE_LIMIT"
    elif is_overflow(detail):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif status in (400, 413) or kind == "invalid_request_error":
        code = "INVALID_REQUEST"
    elif status is None or status >= 500 or kind in ("api_error", "overloaded_error"):
        code = "SERVER"
    else:
        code = f"HTTP_{status}"
    return _with_headers(LlmError(message, code, status=status), headers)


def chat_error(
    status: int | None, error: tuple[str | None, str | None, str | None], headers: Mapping[str, str] | None = None
) -> LlmError:
    """Classify a chat-completions error (HTTP or in-band) in the order of spec 04 §5.6."""
    kind, code_field, message = error
    message = message if message is not None else f"chat completions API error (HTTP {status})"
    detail = _detail(kind, code_field, message)
    if status in (401, 403):
        code = "AUTH"
    elif status == 413:
        code = "INVALID_REQUEST"
    elif is_quota(detail):
        code = "QUOTA"
    elif status == 429:
        code = "RATE_LIMIT"
    elif status in (400, None) and is_overflow(detail):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif status == 400:
        code = "INVALID_REQUEST"
    elif status is None or status >= 500:
        code = "SERVER"
    else:
        code = f"HTTP_{status}"
    return _with_headers(LlmError(message, code, status=status), headers)


def _with_headers(error: LlmError, headers: Mapping[str, str] | None) -> LlmError:
    if headers is not None:
        error.provider_retry_after_ms = retry_after_ms(headers.get("retry-after"))
        error.request_id = request_id(headers)
    return error
