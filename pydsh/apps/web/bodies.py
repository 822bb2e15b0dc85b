"""Request bodies of the web API: their models and the one reader every route uses (spec 12 §2 S10, §4).

The reader answers every bad body with one line of JSON before a handler sees it: 413 over 2 MB, 408
when the body is too slow, 400 for bad JSON (or JSON nested deeper than the frames of every other
frontend may be), 422 for unknown or bad fields. Text enters as every frontend takes it (decision
0017): an unpaired UTF-16 surrogate (a ``\\ud800`` escape, or bytes that are not UTF-8) becomes U+FFFD.
"""

from __future__ import annotations

import zoneinfo
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from starlette.requests import ClientDisconnect, Request

from pydsh.apps.web.errors import ApiError
from pydsh.apps.web.guard import MAX_BODY
from pydsh.apps.web.limits import BODY_TIMED_OUT
from pydsh.images.store import MAX_IMAGES_PER_MESSAGE
from pydsh.kernel.text import without_lone_surrogates
from pydsh.wire.framing import MAX_DEPTH, FrameError, FrameTooDeep, parse_frame

MAX_PROMPT = 1024 * 1024

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageBlock(Strict):
    """An image of a prompt, inline as the SDK takes it (``pydsh.images.prompt`` stores it)."""

    type: Literal["image"]
    data: str
    mimeType: str


class PromptFields(Strict):
    text: str
    images: Annotated[list[ImageBlock], Field(max_length=MAX_IMAGES_PER_MESSAGE)] | None = None
    """Images riding with the text (the composer's paste and upload)."""
    clientMessageId: str | None = None
    clientTimeZone: str | None = None
    references: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] | None = None
    """Ids of the sessions the prompt refers to (the composer's ``@``; ``references.py``)."""


class PromptBody(PromptFields):
    mode: Literal["queue", "steer"] = "queue"


class ModelBody(Strict):
    provider: str
    model: str
    effort: str | None = None


class CreateBody(Strict):
    cwd: str
    agentPreset: str | None = None
    permissionPreset: str | None = None
    model: ModelBody | None = None
    prompt: PromptFields | None = None


class PermissionBody(Strict):
    preset: str


class TitleBody(Strict):
    title: str


class DecisionBody(Strict):
    outcome: Literal["allowed-once", "rejected"]


class AnswerBody(Strict):
    id: str
    selected: list[str]
    custom: str | None = None


class AnswersBody(Strict):
    answers: list[AnswerBody] | None = None
    skip: bool = False


class EmptyBody(Strict):
    pass


class ClientErrorBody(Strict):
    message: str
    stack: str | None = None


class WorkspaceBody(Strict):
    path: str


def _problem(exc: ValidationError) -> str:
    """One sentence naming the first bad field."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "body"
    if error["type"] == "extra_forbidden":
        return f'Unknown field "{where}".'
    if error["type"] == "missing":
        return f'Field "{where}" is required.'
    return f'Field "{where}": {error["msg"]}.'


def replaced(data: Any) -> Any:
    """``data`` with every string and key's unpaired surrogates replaced by U+FFFD (walked without recursion)."""
    root: list[Any] = [data]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        value = holder[key]
        if isinstance(value, str):
            holder[key] = without_lone_surrogates(value)
        elif isinstance(value, dict):
            fresh = {without_lone_surrogates(k): v for k, v in value.items()}
            holder[key] = fresh
            stack.extend((fresh, k) for k in fresh)
        elif isinstance(value, list):
            stack.extend((value, i) for i in range(len(value)))
    return root[0]


async def _read(request: Request) -> bytes:
    """The raw body: 413 over 2 MB, 408 when the body deadline passed, 400 when the client left."""
    size = 0
    chunks = []
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise ApiError(413, "body_too_large", "The request body is larger than 2 MB.")
            chunks.append(chunk)
    except ClientDisconnect:
        seconds = request.scope.get(BODY_TIMED_OUT)
        if seconds is not None:
            raise ApiError(
                408, "body_timeout", f"The request body did not arrive within {seconds:g} seconds."
            ) from None
        raise ApiError(400, "client_disconnected", "The connection closed before the whole body arrived.") from None
    return b"".join(chunks)


async def read_body(request: Request, model: type[M]) -> M:
    """The JSON body as ``model``; every problem is one 4xx line (see the module docstring)."""
    raw = await _read(request)
    try:
        data = parse_frame(raw) if raw.strip() else {}
    except FrameTooDeep:
        raise ApiError(400, "bad_json", f"The request body nests deeper than {MAX_DEPTH} levels.") from None
    except FrameError:
        raise ApiError(400, "bad_json", "The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_body", "The request body must be a JSON object.")
    data = replaced(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        code = "unknown_field" if exc.errors()[0]["type"] == "extra_forbidden" else "invalid_field"
        raise ApiError(422, code, _problem(exc)) from None


def check_prompt(prompt: PromptFields) -> None:
    """413 for text over 1 MB, 422 for empty text without images or an unknown time zone (before anything is
    queued)."""
    if len(prompt.text.encode()) > MAX_PROMPT:
        raise ApiError(413, "prompt_too_large", "The prompt text is larger than 1 MB.")
    if not prompt.text.strip() and not prompt.images:
        raise ApiError(422, "empty_prompt", "The prompt text is empty.")
    zone = prompt.clientTimeZone
    if zone is not None:
        try:
            zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ApiError(422, "invalid_time_zone", f'"{zone}" is not an IANA time zone.') from None
