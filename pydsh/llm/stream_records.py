"""Durable stream records and block assembly (spec 02 §6, spec 04 §2.8, §3.5).

:class:`AssistantStreamAccumulator` run-length compacts timed chunks into the records logged in
``assistant/message`` / ``assistant/attempt``, byte for byte as the reference writes them;
:func:`expand_assistant_stream` is its strict inverse; :class:`BlockAssembler` folds chunks into
the assistant message content.
"""

from __future__ import annotations

from typing import Any

from pydsh.llm.types import CHUNK_KEYS, FINISH_KINDS, ContentBlock, StreamChunk

MAX_SAFE = 2**53 - 1

_RUN_OF = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks"}
_DELTA_OF = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}
_TEXT_RUN_KEYS = frozenset({"type", "time0", "index", "dt", "texts"})
_TOOL_RUN_KEYS = frozenset({"type", "time0", "index", "dt", "id", "args"})
_PLAIN_KEYS = frozenset({"type", "time", "chunk"})
_BLOCK_TYPES = frozenset({"text", "reasoning", "tool-call"})


def _safe_int(value: object) -> bool:
    return type(value) is int and -MAX_SAFE <= value <= MAX_SAFE


class AssistantStreamAccumulator:
    """Compacts ``(chunk, time)`` pairs into ``AssistantStreamRecord`` dicts as they arrive."""

    __slots__ = ("_records", "_last_time", "_key")

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []
        self._last_time = 0
        self._key: tuple[Any, ...] | None = None

    def add(self, chunk: StreamChunk, time: int) -> None:
        """Record ``chunk`` received at epoch-ms ``time``."""
        ctype = chunk["type"]
        run = _RUN_OF.get(ctype)
        if run is not None:
            key: tuple[Any, ...] = (run, chunk["index"])
            member = chunk["text"]
        elif ctype == "tool-call-delta" and chunk["id"] != "" and chunk.get("name") != "":
            has_name = "name" in chunk
            key = ("tool-call-chunks", chunk["index"], chunk["id"], has_name, chunk.get("name"))
            member = chunk["argumentsDelta"]
        else:
            self._records.append({"type": "chunk", "time": time, "chunk": chunk})
            self._key = None
            return
        gap = time - self._last_time
        if key == self._key and _safe_int(gap):
            record = self._records[-1]
            record["dt"].append(gap)
            record["args" if run is None else "texts"].append(member)
        else:
            self._records.append(_new_run(key, chunk, time, member))
            self._key = key
        self._last_time = time

    def records(self) -> list[dict[str, Any]]:
        """The records so far (the live list; copy it before mutating)."""
        return self._records


def _new_run(key: tuple[Any, ...], chunk: StreamChunk, time: int, member: str) -> dict[str, Any]:
    if key[0] != "tool-call-chunks":
        return {"type": key[0], "time0": time, "index": chunk["index"], "dt": [], "texts": [member]}
    record: dict[str, Any] = {"type": "tool-call-chunks", "time0": time, "index": chunk["index"], "dt": []}
    record["id"] = chunk["id"]
    if "name" in chunk:
        record["name"] = chunk["name"]
    record["args"] = [member]
    return record


def accumulate(timed: list[tuple[int, StreamChunk]]) -> list[dict[str, Any]]:
    """Records of a whole ``[(time, chunk)]`` sequence."""
    acc = AssistantStreamAccumulator()
    for time, chunk in timed:
        acc.add(chunk, time)
    return acc.records()


# -- expansion -------------------------------------------------------------------------------


def expand_assistant_stream(records: object) -> list[tuple[int, StreamChunk]]:
    """The exact timed chunk sequence of ``records``; malformed records raise ``TypeError``."""
    if not isinstance(records, list):
        raise TypeError("assistant stream is not a list")
    out: list[tuple[int, StreamChunk]] = []
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise TypeError(f"stream record {i} is not an object")
        rtype = record.get("type")
        if rtype == "chunk":
            _exact(record, _PLAIN_KEYS, frozenset(), i)
            if not _safe_int(record["time"]):
                raise TypeError(f"stream record {i}: time is not a safe integer")
            check_chunk(record["chunk"], f"stream record {i}")
            out.append((record["time"], record["chunk"]))
        elif rtype in _DELTA_OF:
            _exact(record, _TEXT_RUN_KEYS, frozenset(), i)
            _expand_run(record, "texts", i, out)
        elif rtype == "tool-call-chunks":
            _exact(record, _TOOL_RUN_KEYS, frozenset({"name"}), i)
            _expand_run(record, "args", i, out)
        else:
            raise TypeError(f"stream record {i} has unknown type {rtype!r}")
    return out


def _exact(record: dict[str, Any], required: frozenset[str], optional: frozenset[str], i: int) -> None:
    keys = record.keys()
    missing = required - keys
    if missing:
        raise TypeError(f"stream record {i} lacks {sorted(missing)}")
    extra = keys - required - optional
    if extra:
        raise TypeError(f"stream record {i} has unexpected keys {sorted(extra)}")


def _expand_run(record: dict[str, Any], field: str, i: int, out: list[tuple[int, StreamChunk]]) -> None:
    time0, index, dt, members = record["time0"], record["index"], record["dt"], record[field]
    if not _safe_int(time0):
        raise TypeError(f"stream record {i}: time0 is not a safe integer")
    if not _safe_int(index) or index < 0:
        raise TypeError(f"stream record {i}: index is not a non-negative integer")
    if not isinstance(members, list) or not members or not all(type(m) is str for m in members):
        raise TypeError(f"stream record {i}: {field} is not a non-empty list of strings")
    if not isinstance(dt, list) or len(dt) != len(members) - 1 or not all(_safe_int(d) for d in dt):
        raise TypeError(f"stream record {i}: dt must hold len({field}) - 1 safe integers")
    if record["type"] == "tool-call-chunks":
        call_id, has_name, name = record["id"], "name" in record, record.get("name")
        if type(call_id) is not str or call_id == "" or (has_name and (type(name) is not str or name == "")):
            raise TypeError(f"stream record {i}: id and name must be non-empty strings")
    time = time0
    for n, member in enumerate(members):
        if n:
            time += dt[n - 1]
            if not _safe_int(time):
                raise TypeError(f"stream record {i}: member time is not a safe integer")
        if record["type"] == "tool-call-chunks":
            chunk: StreamChunk = {"type": "tool-call-delta", "index": index, "id": call_id}
            if has_name:
                chunk["name"] = name
            chunk["argumentsDelta"] = member
        else:
            chunk = {"type": _DELTA_OF[record["type"]], "index": index, "text": member}
        out.append((time, chunk))


def check_chunk(chunk: object, where: str) -> None:
    """Validate one stream chunk's type and exact key set (``TypeError`` naming ``where``)."""
    if not isinstance(chunk, dict):
        raise TypeError(f"{where}: chunk is not an object")
    ctype = chunk.get("type")
    spec = CHUNK_KEYS.get(ctype) if isinstance(ctype, str) else None
    if spec is None or not isinstance(ctype, str):
        raise TypeError(f"{where}: unknown chunk type {ctype!r}")
    required, optional = spec
    keys = chunk.keys()
    if not required <= keys or not keys <= required | optional:
        raise TypeError(f"{where}: {ctype} chunk must have keys {sorted(required)} (+ {sorted(optional)})")
    if "index" in chunk and (not _safe_int(chunk["index"]) or chunk["index"] < 0):
        raise TypeError(f"{where}: {ctype} index is not a non-negative integer")
    problem = _chunk_field_problem(ctype, chunk)
    if problem:
        raise TypeError(f"{where}: {ctype} {problem}")


def _chunk_field_problem(ctype: str, chunk: dict[str, Any]) -> str | None:
    if ctype == "block-start" and chunk["blockType"] not in _BLOCK_TYPES:
        return "blockType is not text, reasoning or tool-call"
    if ctype in ("text-delta", "reasoning-delta") and type(chunk["text"]) is not str:
        return "text is not a string"
    if ctype == "tool-call-delta" and not (
        type(chunk["id"]) is str and type(chunk["argumentsDelta"]) is str and type(chunk.get("name", "")) is str
    ):
        return "id, name and argumentsDelta must be strings"
    if ctype == "block-end" and not (isinstance(chunk["block"], dict) and isinstance(chunk["block"].get("type"), str)):
        return "block is not a content block"
    if ctype == "usage" and not isinstance(chunk["usage"], dict):
        return "usage is not an object"
    if ctype == "finish":
        reason = chunk["reason"]
        if not isinstance(reason, dict) or reason.get("kind") not in FINISH_KINDS:
            return "reason has no known kind"
        if reason["kind"] in ("error", "aborted") and not isinstance(reason.get("failure"), dict):
            return "reason needs a failure"
    return None


# -- assembly --------------------------------------------------------------------------------


class BlockAssembler:
    """Folds stream chunks into assistant content blocks, usage, finish reason and replay state.

    Deltas are kept as pieces and joined when the blocks are read: appending to a string a block
    still references copies it whole, which made long streams quadratic.
    """

    __slots__ = ("_blocks", "_pieces", "_order", "_closed", "usage", "_finish", "_replay_state")

    def __init__(self) -> None:
        self._blocks: dict[int, ContentBlock] = {}
        self._pieces: dict[int, list[str]] = {}
        self._order: list[int] = []
        self._closed: set[int] = set()
        self.usage: dict[str, Any] | None = None
        self._finish: dict[str, Any] | None = None
        self._replay_state: dict[str, Any] | None = None

    def _open(self, index: int, block_type: str) -> ContentBlock | None:
        if index in self._closed:
            return None
        block = self._blocks.get(index)
        if block is None:
            block = (
                {"type": "tool-call", "id": "", "name": "", "arguments": ""}
                if block_type == "tool-call"
                else {"type": block_type, "text": ""}
            )
            self._blocks[index] = block
            self._order.append(index)
        return block

    def add(self, chunk: StreamChunk) -> None:
        """Fold one chunk."""
        ctype = chunk["type"]
        if ctype in ("text-delta", "reasoning-delta"):
            block = self._open(chunk["index"], "text" if ctype == "text-delta" else "reasoning")
            if block is not None and "text" in block:
                self._pieces.setdefault(chunk["index"], []).append(chunk["text"])
        elif ctype == "tool-call-delta":
            block = self._open(chunk["index"], "tool-call")
            if block is not None and block["type"] == "tool-call":
                if chunk["id"]:
                    block["id"] = chunk["id"]
                if chunk.get("name"):
                    block["name"] = chunk["name"]
                self._pieces.setdefault(chunk["index"], []).append(chunk["argumentsDelta"])
        elif ctype == "block-start":
            self._open(chunk["index"], chunk["blockType"])
        elif ctype == "block-end":
            index = chunk["index"]
            if index in self._closed:
                return
            if index not in self._blocks:
                self._order.append(index)
            self._pieces.pop(index, None)
            self._blocks[index] = dict(chunk["block"])
            self._closed.add(index)
        elif ctype == "usage":
            self.usage = chunk["usage"]
        elif ctype == "finish":
            self._finish = chunk["reason"]
            self._replay_state = chunk.get("replayState")

    @property
    def finish(self) -> dict[str, Any]:
        """The finish reason (``{"kind": "stop"}`` for a stream without ``finish``)."""
        return self._finish if self._finish is not None else {"kind": "stop"}

    def _dropped(self) -> set[int]:
        """Positions (in content order) removed because a ``max-tokens`` finish truncated tool calls."""
        if self.finish.get("kind") != "max-tokens":
            return set()
        return {pos for pos, i in enumerate(self._order) if self._blocks[i]["type"] == "tool-call"}

    def _join(self) -> None:
        """Fold the pending delta pieces into their blocks' text or arguments."""
        for index, pieces in self._pieces.items():
            block = self._blocks[index]
            field = "arguments" if block["type"] == "tool-call" else "text"
            block[field] += "".join(pieces)
        self._pieces.clear()

    def content(self) -> list[ContentBlock]:
        """Blocks in first-seen index order; tool calls dropped after ``max-tokens``."""
        self._join()
        dropped = self._dropped()
        return [self._blocks[i] for pos, i in enumerate(self._order) if pos not in dropped]

    @property
    def replay_state(self) -> dict[str, Any] | None:
        """The finish chunk's replay envelope, pruned in step with dropped blocks."""
        state = self._replay_state
        dropped = self._dropped()
        if state is None or not dropped or not isinstance(state.get("blocks"), list):
            return state
        return {**state, "blocks": [b for pos, b in enumerate(state["blocks"]) if pos not in dropped]}

    def interrupted_blocks(self) -> list[ContentBlock]:
        """The interrupted prefix kept on abort: text/reasoning blocks with non-whitespace text."""
        self._join()
        out = []
        for i in self._order:
            block = self._blocks[i]
            if block["type"] in ("text", "reasoning") and isinstance(block.get("text"), str) and block["text"].strip():
                out.append(block)
        return out
