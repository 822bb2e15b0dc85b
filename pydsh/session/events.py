"""The v4 envelope and header, the event-type registry and lossless JSON (spec 02 §2–§5).

Hot paths work on plain dicts with hand-written checks: no model is built per event. Data
handed to ``Session.append`` is copied into :class:`FrozenDict` / :class:`FrozenList`, so the
log cannot be changed behind its back.
"""

from __future__ import annotations

import contextlib
import gc
import math
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from pydsh.kernel.errors import PydshError
from pydsh.kernel.text import without_lone_surrogates
from pydsh.session.errors import SessionFormatUnsupportedError, SessionLogError

Event = dict[str, Any]
Payload = Callable[[Any], str | None]
"""A payload check: returns a problem description or ``None`` when the data is fine."""

SURFACE_TYPES = frozenset({"system/message", "developer/message", "user/message", "assistant/message", "tool/result"})
ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "ignorable", "surfaceOp", "sourceEventSeqs"})
HEADER_KEYS = frozenset(
    {"type", "version", "id", "createdAt", "isSeeded", "delegationDepth", "cwd", "parentSession", "origin"}
    | {"agentPreset"}
)
RETIRED_HEADER_KEYS = frozenset({"sandboxMode", "approvalPolicy"})
FORMAT_VERSION = 4
MAX_SAFE = 2**53 - 1
PLUGIN_TYPE = re.compile(r"^plugin:[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*$")

_TYPES: dict[str, Payload | None] = {}


def register_event_type(event_type: str, check: Payload | None = None) -> None:
    """Declare an event type readers accept; ``check`` validates its ``data`` on append/read.

    Declaring a type again replaces its check (plugins refine the permissive defaults).
    """
    if event_type in SURFACE_TYPES and event_type in _TYPES and check is None:
        return
    _TYPES[event_type] = check


def is_known(event_type: str) -> bool:
    return event_type in _TYPES


# -- lossless JSON -------------------------------------------------------------------------


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation; serialises as a plain JSON object."""

    __slots__ = ()

    def _refuse(self, *_a: object, **_k: object) -> NoReturn:
        raise TypeError("logged event data is immutable")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __deepcopy__(self, memo: object) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A list that refuses mutation; serialises as a plain JSON array."""

    __slots__ = ()

    def _refuse(self, *_a: object, **_k: object) -> NoReturn:
        raise TypeError("logged event data is immutable")

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _refuse
    sort = reverse = __iadd__ = __imul__ = _refuse

    def __deepcopy__(self, memo: object) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (thaw(self),))


def _untrack_in_cpython(container: Any) -> None:
    """Bind :func:`_untrack` on first use (``ctypes`` stays off the start-up path), then untrack."""
    global _untrack
    try:
        import ctypes

        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except (ImportError, AttributeError):  # not CPython: the containers stay tracked
        _untrack = _keep_tracked
        return
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    _untrack = untrack
    untrack(container)


def _keep_tracked(container: Any) -> None:
    """Where the interpreter offers no way to untrack: nothing."""


_untrack: Callable[[Any], None] = _untrack_in_cpython
"""Take a frozen container out of the cyclic collector's view (CPython's ``PyObject_GC_UnTrack``). The log's
frozen data are trees of JSON values, built fresh, that never change: they cannot be part of a reference
cycle, yet as instances of dict and list subclasses CPython tracks them all (exact dicts and tuples of atoms
it would skip). They are most of a busy server's containers, so every full collection walked them for
nothing; reference counting still frees them."""


def _tree(container: Any) -> Any:
    """``container`` (a frozen one of JSON values only), untracked; see :data:`_untrack`."""
    _untrack(container)
    return container


class _Lossy(PydshError):
    """A value lossless JSON cannot carry; ``where`` grows by one key or index per level it unwinds."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.where = ""


def snapshot(value: Any, path: str = "data") -> Any:
    """Deep-copy ``value`` into frozen containers, enforcing lossless JSON (spec 02 §3); text enters the
    log with unpaired surrogates replaced by U+FFFD (``pydsh.kernel.text``). A ``TypeError`` names where
    under ``path`` the offending value is."""
    try:
        return _frozen_copy(value)
    except _Lossy as exc:
        raise TypeError(f"{path}{exc.where}: {exc.problem}") from None


def _frozen_copy(value: Any) -> Any:
    """``snapshot``'s walk; the path of a failure is built only when there is one (every logged event passes here)."""
    kind = type(value)
    if kind is str:
        return value if value.isascii() else without_lone_surrogates(value)
    if value is None or kind is bool:
        return value
    if kind is int:
        if -MAX_SAFE <= value <= MAX_SAFE:
            return value
        raise _Lossy(f"integer {value} is outside the safe range ±(2^53-1)")
    if kind is float:
        if not math.isfinite(value):
            raise _Lossy(f"non-finite number {value!r} is not lossless JSON")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise _Lossy("-0.0 is not lossless JSON")
        return value
    if isinstance(value, dict):
        copied: dict[str, Any] = {}
        key: Any = None
        try:
            for key, item in value.items():
                if type(key) is not str:
                    raise _Lossy(f"object key {key!r} is not a string")
                copied[key if key.isascii() else without_lone_surrogates(key)] = _frozen_copy(item)
        except _Lossy as exc:
            if type(key) is str:
                exc.where = f".{key}{exc.where}"
            raise
        return _tree(FrozenDict(copied))
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        try:
            for item in value:
                out.append(_frozen_copy(item))
        except _Lossy as exc:
            exc.where = f"[{len(out)}]{exc.where}"
            raise
        return _tree(FrozenList(out))
    if isinstance(value, str):
        return without_lone_surrogates(str(value))
    if isinstance(value, int):
        return _frozen_copy(int(value))
    raise _Lossy(f"{type(value).__name__} is not lossless JSON")


def freeze(value: Any) -> Any:
    """``value`` (parsed JSON) with every dict and list made immutable; frozen containers are shared, not copied."""
    kind = type(value)
    if kind is dict:
        return _tree(FrozenDict({k: freeze(v) if type(v) in _MUTABLE else v for k, v in value.items()}))
    if kind is list:
        return _tree(FrozenList([freeze(v) if type(v) in _MUTABLE else v for v in value]))
    return value


_MUTABLE = (dict, list)


def freeze_parsed(value: Any) -> Any:
    """``freeze`` for freshly parsed JSON that nobody else holds: nested containers are replaced in
    place, so each is copied once (a cold read freezes every stored event)."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(item) in _MUTABLE:
                value[key] = freeze_parsed(item)
        return _tree(FrozenDict(value))
    if kind is list:
        for index, item in enumerate(value):
            if type(item) in _MUTABLE:
                value[index] = freeze_parsed(item)
        return _tree(FrozenList(value))
    return value


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_resume = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a stored log becomes tens of thousands of long-lived
    containers: parsing creates no cycles, and every collection pass would rescan the growing heap."""
    global _gc_holders, _gc_resume
    with _gc_lock:
        if _gc_holders == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_resume:
                gc.enable()


def thaw(value: Any) -> Any:
    """A mutable deep copy of (possibly frozen) JSON data."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


# -- header ----------------------------------------------------------------------------------


def version_gate(header: dict[str, Any]) -> None:
    """Refuse other format generations before any other check (spec 02 §2, exact wording)."""
    version = header.get("version")
    sid = header.get("id")
    if isinstance(version, int) and not isinstance(version, bool) and version != FORMAT_VERSION:
        if version > FORMAT_VERSION:
            raise SessionFormatUnsupportedError(
                f'session "{sid}" uses log format v{version}, but this harness reads only v4: '
                "the log was written by a newer harness — upgrade the harness to open it"
            )
        raise SessionFormatUnsupportedError(
            f'session "{sid}" uses log format v{version}, older than the supported v4, '
            "and this build ships no upgrade path for it"
        )


def header_problem(header: object) -> str | None:
    """What is wrong with a v4 header record, or ``None``."""
    if not isinstance(header, dict):
        return "the header is not a JSON object"
    if header.get("type") != "session":
        return 'the header type is not "session"'
    for key in header:
        if key in RETIRED_HEADER_KEYS:
            return f'the header carries the retired key "{key}"'
        if key not in HEADER_KEYS:
            return f'the header has unknown key "{key}"'
    if header.get("version") != FORMAT_VERSION:
        return "the header version is not 4"
    if not isinstance(header.get("id"), str) or not header["id"]:
        return "the header id is not a non-empty string"
    if not _nonneg_int(header.get("createdAt")):
        return "the header createdAt is not a non-negative safe integer"
    if type(header.get("isSeeded")) is not bool:
        return "the header isSeeded is not a boolean"
    if not _nonneg_int(header.get("delegationDepth")):
        return "the header delegationDepth is not a non-negative integer"
    for key in ("cwd", "parentSession", "agentPreset"):
        if key in header and not isinstance(header[key], str):
            return f"the header {key} is not a string"
    if "origin" in header and header["origin"] != "subagent":
        return 'the header origin is not "subagent"'
    return None


def make_header(
    session_id: str,
    created_at: int,
    *,
    cwd: str | None = None,
    is_seeded: bool = False,
    delegation_depth: int = 0,
    parent_session: str | None = None,
    origin: str | None = None,
    agent_preset: str | None = None,
) -> dict[str, Any]:
    """A v4 header with keys in the fixture's order; absent optionals are omitted."""
    header: dict[str, Any] = {"type": "session", "version": FORMAT_VERSION, "id": session_id}
    header["createdAt"] = created_at
    if cwd is not None:
        header["cwd"] = cwd
    header["isSeeded"] = is_seeded
    header["delegationDepth"] = delegation_depth
    if parent_session is not None:
        header["parentSession"] = parent_session
    if origin is not None:
        header["origin"] = origin
    if agent_preset is not None:
        header["agentPreset"] = agent_preset
    problem = header_problem(header)
    if problem:
        raise ValueError(problem)
    return header


# -- envelope --------------------------------------------------------------------------------


def _nonneg_int(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE


def _pos_int(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_SAFE


def check_envelope(event: object, expected_seq: int) -> Event:
    """Validate the envelope of a read event; unknown vocabulary refuses the whole log."""
    if not isinstance(event, dict):
        raise SessionLogError(expected_seq, "event is not a JSON object")
    if not ENVELOPE_KEYS.issuperset(event):
        key = next(k for k in event if k not in ENVELOPE_KEYS)
        raise SessionLogError(expected_seq, f'event has unknown key "{key}"')
    seq = event.get("seq")
    if seq != expected_seq or type(seq) is not int:
        raise SessionLogError(expected_seq, f"event seq {seq!r} is not {expected_seq} (gap or disorder)")
    if type(event.get("time")) is not int:
        raise SessionLogError(seq, "event time is not an integer")
    if "data" not in event:
        raise SessionLogError(seq, "event has no data")
    etype = event.get("type")
    if not isinstance(etype, str):
        raise SessionLogError(seq, "event type is not a string")
    ignorable = event.get("ignorable")
    if "ignorable" in event and ignorable is not True:
        raise SessionLogError(seq, "ignorable must be true when present")
    if etype not in _TYPES:
        if PLUGIN_TYPE.match(etype) and ignorable is not True:
            raise SessionLogError(seq, f"plugin record {etype} must be ignorable")
        if ignorable is not True:
            raise SessionFormatUnsupportedError(
                f'seq {seq}: unknown event type "{etype}" is not ignorable; this harness cannot read the log'
            )
    return event


def payload_problem(event_type: str, data: Any) -> str | None:
    """Check ``data`` of a known type (the core checks live in :mod:`pydsh.session.payloads`)."""
    check = _TYPES.get(event_type)
    return check(data) if check is not None else None


def build_event(
    event_type: str,
    seq: int,
    time: int,
    data: Any,
    *,
    ignorable: bool = False,
    source_event_seqs: list[int] | None = None,
    surface_op: Any = None,
) -> Event:
    """An envelope with keys in the golden fixture's order."""
    event: Event = {"type": event_type, "seq": seq, "time": time, "data": data}
    if ignorable:
        event["ignorable"] = True
    if source_event_seqs is not None:
        event["sourceEventSeqs"] = source_event_seqs
    if surface_op is not None:
        event["surfaceOp"] = surface_op
    return event


def inherited_event_count(events: list[Event]) -> int:
    """Prefix length of a seeded log: the seq of its last inherited ``session/end-seed``."""
    for event in reversed(events):
        if event["type"] == "session/end-seed" and event["data"].get("inherited"):
            return int(event["seq"])
    return 0
