"""Payload checks of the v4 vocabulary, registered on import (spec 02 §4, §5).

Core types get precise checks; the plugin-declared types of §4.2 are known (so reference
logs open) and get a light object check unless the plugin that owns them refines it.
"""

from __future__ import annotations

from typing import Any

from pydsh.session.events import MAX_SAFE, register_event_type

TURN_END_KINDS = frozenset({"completed", "aborted", "blocked", "error", "max-tokens", "interrupted", "forked"})
HEADER_REASONS = frozenset({"initial", "resume", "change", "series"})
SPLICE_TARGETS = frozenset({"next-turn", "next-step"})
ROLE_OF = {
    "user/message": "user",
    "system/message": "system",
    "developer/message": "developer",
    "assistant/message": "assistant",
    "tool/result": "tool",
}


def _pos(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_SAFE


def _obj(data: Any) -> str | None:
    return None if isinstance(data, dict) else "data is not an object"


def _turn_step(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "data is not an object"
    if not _pos(data.get("turn")):
        return "turn is not a positive integer"
    if not _pos(data.get("step")):
        return "step is not a positive integer"
    return None


def message_problem(message: Any, role: str) -> str | None:
    """What is wrong with a logged message of ``role``, or ``None``."""
    if not isinstance(message, dict):
        return "message is not an object"
    if message.get("role") != role:
        return f'message role is not "{role}"'
    if not isinstance(message.get("id"), str) or not message["id"]:
        return "message id is not a non-empty string"
    content = message.get("content")
    if not isinstance(content, list):
        return "message content is not a list"
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"content block {i} has no string type"
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str):
        return "message source has no string kind"
    if role == "tool":
        if not isinstance(message.get("toolCallId"), str):
            return "tool message has no toolCallId"
        if "isError" in message and type(message["isError"]) is not bool:
            return "tool message isError is not a boolean"
    return None


def _turn(data: Any) -> str | None:
    if not isinstance(data, dict) or not _pos(data.get("turn")):
        return "turn is not a positive integer"
    return None


def _turn_end(data: Any) -> str | None:
    problem = _turn(data)
    if problem:
        return problem
    reason = data.get("reason")
    if not isinstance(reason, dict) or reason.get("kind") not in TURN_END_KINDS:
        return "reason.kind is not a turn-end reason"
    return None


def _user_message(data: Any) -> str | None:
    return message_problem(data, "user")


def _stepped_message(role: str):  # type: ignore[no-untyped-def]
    def check(data: Any) -> str | None:
        return _turn_step(data) or message_problem(data.get("message"), role)

    return check


def _assistant_message(data: Any) -> str | None:
    problem = _turn_step(data) or message_problem(data.get("message"), "assistant")
    if problem:
        return problem
    if not isinstance(data.get("stream"), list):
        return "stream is not a list"
    if "interrupted" in data and data["interrupted"] is not True:
        return "interrupted must be true when present"
    return None


def _assistant_attempt(data: Any) -> str | None:
    problem = _turn_step(data)
    if problem:
        return problem
    return None if isinstance(data.get("stream"), list) else "stream is not a list"


def _tool_call(data: Any) -> str | None:
    problem = _turn_step(data)
    if problem:
        return problem
    for key in ("callId", "name", "arguments"):
        if not isinstance(data.get(key), str):
            return f"{key} is not a string"
    return None


def _tool_result(data: Any) -> str | None:
    problem = _turn_step(data) or message_problem(data.get("message"), "tool")
    if problem:
        return problem
    error = data.get("error")
    if error is not None:
        if not isinstance(error, dict) or not isinstance(error.get("code"), str):
            return "error has no string code"
        if data["message"].get("isError") is not True:
            return "a result with error must have message.isError true"
    return None


def _request_header(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "data is not an object"
    header = data.get("header")
    if not isinstance(header, dict) or not isinstance(header.get("config"), dict):
        return "header.config is not an object"
    config = header["config"]
    if not isinstance(config.get("provider"), str) or not isinstance(config.get("model"), str):
        return "header.config needs provider and model strings"
    if "system" in header:
        return "header must not carry system"
    if data.get("reason") not in HEADER_REASONS:
        return "reason is not initial, resume, change or series"
    return None


def _request_context(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "data is not an object"
    if not isinstance(data.get("provider"), str) or not isinstance(data.get("model"), str):
        return "provider and model must be strings"
    return None


def _end_seed(data: Any) -> str | None:
    if data in ({}, {"inherited": True}):
        return None
    return 'data must be {} or {"inherited": true}'


def _splice(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "data is not an object"
    if data.get("target") not in SPLICE_TARGETS:
        return "target is not next-turn or next-step"
    if type(data.get("start")) is not int or data["start"] < 0:
        return "start is not a non-negative integer"
    if "removedCount" in data and not _pos(data["removedCount"]):
        return "removedCount is not a positive integer"
    inserted = data.get("inserted")
    if not isinstance(inserted, list):
        return "inserted is not a list"
    for message in inserted:
        problem = message_problem(message, "user")
        if problem:
            return f"inserted {problem}"
    if "outcome" in data and data["outcome"] != "canceled":
        return 'outcome must be "canceled"'
    return None


CORE = {
    "turn/start": _turn,
    "turn/end": _turn_end,
    "step/start": _turn_step,
    "step/end": _turn_step,
    "user/message": _user_message,
    "system/message": _stepped_message("system"),
    "developer/message": _stepped_message("developer"),
    "assistant/message": _assistant_message,
    "assistant/attempt": _assistant_attempt,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
    "request/header": _request_header,
    "request/context": _request_context,
    "session/end-seed": _end_seed,
    "agent/inbox/spliced": _splice,
}

KNOWN_PLUGIN_TYPES = (
    "session/title",
    "session/title-llm-request",
    "todo/write",
    "model/selection",
    "agent-preset/selected",
    "permission/preset",
    "sandbox/mode",
    "approval/policy",
    "approval/asked",
    "approval/decided",
    "working-directory/change",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
    "llm/retry",
    "llm/retry-started",
    "command/run",
    "command/done",
    "hook/invoked",
    "hook/result",
    "subagent/descriptor",
    "subagent/catalog",
    "subagent/model-selection-policy",
    "job/registered",
    "job/settled",
    "tool/ptc-dispatch-start",
    "tool/ptc-dispatch",
    "goal/change",
    "plan/mode",
    "schedule/change",
    "feedback/record",
    "feedback/message-put",
    "feedback/message-delete",
    "team/member",
    "team/task",
    "team/message/queued",
    "team/message/delivered",
    "tool-workflow/run-start",
    "tool-workflow/run-end",
    "tool-workflow/agent-start",
    "tool-workflow/agent-end",
    "web/deepseek-search-llm-request",
    "workspace/changes",
    "deliverables/presented",
    "session-log-deepseek/delivery-accepted",
)


def _image_offload(data: Any) -> str | None:
    """``{targets: [{seq, imageIndexes}]}``: nonempty, each index list strictly increasing (the reference's shape)."""
    targets = data.get("targets") if isinstance(data, dict) and set(data) == {"targets"} else None
    if not isinstance(targets, list) or not targets:
        return "data must contain a nonempty targets array"
    for target in targets:
        if not isinstance(target, dict) or set(target) != {"seq", "imageIndexes"} or type(target["seq"]) is not int:
            return "each target must contain a seq and nonempty imageIndexes"
        indexes = target["imageIndexes"]
        if not isinstance(indexes, list) or not indexes or any(type(i) is not int or i < 0 for i in indexes):
            return "each target must contain a seq and nonempty imageIndexes"
        if indexes != sorted(set(indexes)):
            return "imageIndexes must be strictly increasing"
    return None


for _type, _check in CORE.items():
    register_event_type(_type, _check)
register_event_type("image/offload", _image_offload)
for _type in KNOWN_PLUGIN_TYPES:
    register_event_type(_type, _obj)
