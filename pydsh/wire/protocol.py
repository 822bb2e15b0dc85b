"""Wire models of the SDK JSON-RPC protocol (spec 06 §4–§7): request params, results, ids (frames: ``framing``).

The params models check the raw ``params`` object in the order spec 06 §5 fixes and raise
:class:`WireError` with the exact ``-32603`` message; results are validated by the client with the
models of :mod:`pydsh.wire.results` (re-exported here). Both sides use them only at the trust
boundary: notifications stay plain dicts.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from pydsh.kernel.config import BaseModel, ConfigDict, model_validator
from pydsh.kernel.errors import PydshError

SERVER_INFO = {"name": "deepseek-harness-sdk-runtime", "version": "0.0.1"}
INTERNAL_ERROR = -32603
MAX_SAFE_INTEGER = 2**53 - 1
METHODS = (
    "initialize",
    "session/prompt",
    "session/resume",
    "session/wait",
    "session/working-directory/get",
    "session/working-directory/set",
    "shutdown",
)
NOTIFICATIONS = ("session.event", "session.status", "subagent.started", "subagent.finished")
DELTA_NOTIFICATION = "pydsh.session.delta"
TEAM_NOTIFICATION = "pydsh.team"


class WireError(PydshError):
    """A request the server refuses; ``str(exc)`` is the ``-32603`` message sent back."""


def is_request_id(value: object) -> TypeGuard[str | float]:
    """A JSON-RPC request id: a string or a number, never a boolean."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def echo_id(value: str | float) -> str | float | None:
    """The id to answer with: the request's, with an integral float written as an integer (as JS would);
    ``None`` for a number JSON cannot carry back (``1e400`` parses as infinity)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer():
            return int(value)
    return value


def safe_positive_int(value: object) -> int | None:
    """``value`` as an integer in [1, 2^53-1] (``8.0`` counts as 8, booleans never), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    number = int(value)
    return number if 1 <= number <= MAX_SAFE_INTEGER else None


def _non_empty(value: object) -> bool:
    return isinstance(value, str) and bool(value)


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class InitializeParams(_Params):
    """``initialize``: the route, workspace and budget for sessions opened afterwards."""

    cwd: str
    provider: str
    model: str
    reasoningEffort: str | None = None
    maxTokens: int | None = None
    deltas: bool = False
    team: bool = False

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if "reasoningEffort" in raw and not _non_empty(raw["reasoningEffort"]):
            raise WireError("initialize reasoningEffort must be a non-empty string")
        max_tokens = None
        if "maxTokens" in raw:
            max_tokens = safe_positive_int(raw["maxTokens"])
            if max_tokens is None:
                raise WireError("initialize maxTokens must be a positive safe integer")
        if not isinstance(raw.get("cwd"), str):
            raise WireError("initialize cwd must be a string")
        for key in ("provider", "model"):
            if not _non_empty(raw.get(key)):
                raise WireError(f"initialize {key} must be a non-empty string")
        extensions = raw.get("pydshExtensions")
        return {
            "cwd": raw["cwd"],
            "provider": raw["provider"],
            "model": raw["model"],
            "reasoningEffort": raw.get("reasoningEffort"),
            "maxTokens": max_tokens,
            "deltas": isinstance(extensions, dict) and extensions.get("deltas") is True,
            "team": isinstance(extensions, dict) and extensions.get("team") is True,
        }


class PromptParams(_Params):
    """``session/prompt``: one user message for a session."""

    sessionId: str
    contentBlocks: list[dict[str, Any]]

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if not _non_empty(raw.get("sessionId")):
            raise WireError("session/prompt requires a non-empty sessionId string")
        blocks = raw.get("contentBlocks")
        if not isinstance(blocks, list) or not blocks or not all(isinstance(b, dict) for b in blocks):
            raise WireError("session/prompt requires a non-empty contentBlocks array")
        for index, block in enumerate(blocks):
            kind = block.get("type")
            if kind not in ("text", "image") or (kind == "text" and not isinstance(block.get("text"), str)):
                raise WireError(f"session/prompt content block {index} is invalid")
        return {"sessionId": raw["sessionId"], "contentBlocks": blocks}

    @property
    def has_inline_image(self) -> bool:
        """Whether a block carries image bytes (``{type:"image", data, mimeType}``) to admit."""
        return any(b.get("type") == "image" and "data" in b for b in self.contentBlocks)


class ResumeParams(_Params):
    """``session/resume``: reopen a persisted session."""

    sessionId: str

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if not _non_empty(raw.get("sessionId")):
            raise WireError("session/resume requires a non-empty sessionId string")
        return {"sessionId": raw["sessionId"]}


class WaitParams(_Params):
    """``session/wait``: settle a session opened by this server."""

    sessionId: str

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(raw.get("sessionId"), str):
            raise WireError("session/wait requires a sessionId string")
        return {"sessionId": raw["sessionId"]}


class WorkingDirectoryParams(_Params):
    """``session/working-directory/get`` (and the base of ``set``)."""

    sessionId: str

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if not _non_empty(raw.get("sessionId")):
            raise WireError("working-directory requests require a non-empty sessionId")
        return {"sessionId": raw["sessionId"]}


class SetWorkingDirectoryParams(_Params):
    """``session/working-directory/set``: enter a directory (absolute or relative to the current one)."""

    sessionId: str
    path: str

    @model_validator(mode="before")
    @classmethod
    def _check(cls, raw: dict[str, Any]) -> dict[str, Any]:
        if not _non_empty(raw.get("sessionId")):
            raise WireError("working-directory requests require a non-empty sessionId")
        if not isinstance(raw.get("path"), str):
            raise WireError("working-directory set requires a path string")
        return {"sessionId": raw["sessionId"], "path": raw["path"]}
