"""JSONL persistence: one ``session.v4.jsonl`` per session, a single writer, batched fsyncs (spec 02 §9).

Layout: ``<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.v4.jsonl`` plus ``session.lock``.
Nothing touches the disk before the first flush; the first write publishes header and batch
atomically (temp file, fsync, link). Appends are batched for 200 ms or until a flush barrier.
A torn last line is never returned and is truncated before the next append; a damaged line
followed by a committed ``turn/end`` is corruption, never skipped; one followed by none is cut
like a torn tail, after what follows it was set aside in a file beside the log. OS failures
become one ``SessionError`` naming the file and the errno.

``compression`` only picks the encoding of new logs (``session.v4.jsonl`` or ``session.v4.jsonl.zstd``,
one checksummed zstd frame per batch, like the reference runtime): every store reads both, and a
resumed log keeps the encoding it has, so appends never rewrite what is stored.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import fcntl
import functools
import itertools
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.kernel.profiles import private_dir
from pydsh.session.errors import (
    SessionAlreadyExistsError,
    SessionAlreadyOwnedError,
    SessionError,
    SessionFormatUnsupportedError,
    SessionHandleClosedError,
    SessionLogError,
    SessionOwnershipLostError,
    SessionPersistenceCorruptionError,
    SessionPersistenceIOError,
    SessionPersistenceNotFoundError,
    SessionReadOnlyError,
)
from pydsh.session.events import (
    SURFACE_TYPES,
    Event,
    check_envelope,
    collector_paused,
    freeze_parsed,
    header_problem,
    inherited_event_count,
    version_gate,
)
from pydsh.session.hooks import SESSION_EVENT, SESSION_FLUSH
from pydsh.session.keys import SESSION_PERSISTENCE, SESSIONS
from pydsh.session.log import Session
from pydsh.session.persistence.base import Access, SessionHandle, SessionPersistence
from pydsh.session.persistence.workers import Workers

if TYPE_CHECKING:
    import zstandard

BATCH_WINDOW_S = 0.2
SMALL_BATCH = 32 * 1024
LEVEL = 9
"""zstd level of every batch: level 15 wrote read steps 4 % smaller and compressed a step's batch in 86 µs
instead of 14 µs, on the path of every step; both stay under the reference runtime's bytes (decision 0016)."""
PLAIN = "session.v4.jsonl"
ZSTD = "session.v4.jsonl.zstd"
LOCK = "session.lock"
log = logging.getLogger("pydsh.session.persistence")


# -- path encoding (UTF-16 code units, like the reference) --------------------------------------

_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _code_units(text: str) -> Iterator[int]:
    raw = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(raw), 2):
        yield raw[i] | (raw[i + 1] << 8)


def project_key(cwd: str | None) -> str:
    """``--<key>--`` for a workspace path (``_no-cwd`` when there is none)."""
    if cwd is None:
        return "_no-cwd"
    out: list[str] = []
    in_separator_run = False
    for unit in _code_units(cwd):
        ch = chr(unit)
        if ch in "/\\:":
            if not in_separator_run:
                out.append("-")
            in_separator_run = True
            continue
        in_separator_run = False
        out.append(ch if ch in _KEEP else f"~{unit:04X}")
    key = "".join(out).lstrip("-")[:251] or "root"
    return f"--{key}--"


def encode_segment(session_id: str) -> str:
    """Injective, filesystem-safe directory name of a session id."""
    if not session_id:
        raise ValueError("session id must not be empty")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    return "".join(chr(u) if chr(u) in _KEEP else f"~{u:04X}" for u in _code_units(session_id))


# -- row codec -------------------------------------------------------------------------------


def encode_ranges(seqs: list[int]) -> list[Any]:
    """Range-encode ascending runs of three or more seqs (``[4,5,6,9]`` -> ``[[4,6],9]``)."""
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        return list(seqs)
    out: list[Any] = []
    i = 0
    while i < len(seqs):
        j = i
        while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1:
            j += 1
        if j - i >= 2:
            out.append([seqs[i], seqs[j]])
        else:
            out.extend(seqs[i : j + 1])
        i = j + 1
    return out


def decode_ranges(raw: Any, seq: int) -> list[int]:
    if not isinstance(raw, list):
        raise SessionLogError(seq, "sourceEventSeqs is not a list")
    out: list[int] = []
    ranged = False
    for item in raw:
        if isinstance(item, list):
            if len(item) != 2 or not all(type(x) is int for x in item) or item[0] > item[1]:
                raise SessionLogError(seq, f"invalid sourceEventSeqs range {item!r}")
            out.extend(range(item[0], item[1] + 1))
            ranged = True
        else:
            out.append(item)
    if ranged and any(b <= a for a, b in itertools.pairwise(out)):
        raise SessionLogError(seq, "ranged sourceEventSeqs must be strictly increasing")
    return out


def encode_line(event: Event) -> bytes:
    row = event
    sources = event.get("sourceEventSeqs")
    if sources is not None and len(sources) >= 3:
        row = dict(event)
        row["sourceEventSeqs"] = encode_ranges(list(sources))
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(row, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


SHARED_DATA_MIN = 1024
"""Bytes from which a line's ``data`` is parsed apart and shared with the lines that repeat it."""


class Decoder:
    """Decodes the lines of one log into events with frozen ``data``.

    A large ``data`` repeated byte for byte (every ``request/header`` after a resume carries the
    same tool schemas) is parsed and frozen once and shared: the same bytes make the same value.
    """

    def __init__(self) -> None:
        self._shared: dict[bytes, Any] = {}

    def event(self, line: bytes, seq: int) -> Event:
        """The event of one line (envelope checked, ranged ``sourceEventSeqs`` expanded), ``data`` frozen."""
        event = self._split(line) if len(line) >= SHARED_DATA_MIN else None
        if event is None:
            try:
                event = json.loads(line)
            except ValueError as exc:
                raise SessionLogError(seq, f"unparsable line ({exc})") from None
            if type(event) is dict and type(event.get("data")) in (dict, list):
                event["data"] = freeze_parsed(event["data"])
        if type(event) is dict and "sourceEventSeqs" in event:
            event["sourceEventSeqs"] = decode_ranges(event["sourceEventSeqs"], seq)
        return check_envelope(event, seq)

    def _split(self, line: bytes) -> Event | None:
        """``line`` parsed as its envelope and its ``data`` value when ``data`` is its last key, else ``None``.

        Surface events are left whole: their ``surfaceOp`` follows ``data``."""
        at = line.find(b',"data":')
        if at < 0 or not line.endswith(b"}"):
            return None
        tail = line[at + 8 : -1]
        try:
            envelope = json.loads(line[:at] + b"}")
            if not isinstance(envelope, dict) or not isinstance(envelope.get("type"), str):
                return None
            if envelope["type"] in SURFACE_TYPES:
                return None
            data = self._shared.get(tail)
            if data is None:
                data = self._shared[tail] = freeze_parsed(json.loads(tail))
        except ValueError:
            return None
        envelope["data"] = data
        return envelope


# -- reading ---------------------------------------------------------------------------------


@dataclass
class Damage:
    """A damaged line no later ``turn/end`` commits: it and what follows are set aside (02 §9.5)."""

    line: int
    problem: str
    lines: int
    data: bytes


@dataclass
class StoredLog:
    header: dict[str, Any]
    events: list[Event]
    committed_size: int
    torn_offset: int | None
    damage: Damage | None = None


def _zstandard(path: Path) -> Any:
    """The ``zstandard`` module, imported on the first zstd read."""
    try:
        import zstandard
    except ImportError:
        raise SessionFormatUnsupportedError(
            f"{path} is zstd-compressed; install the zstandard package to read it"
        ) from None
    return zstandard


FRAME_READ = 4096
"""Compressed bytes first offered for one frame (doubled while it is incomplete): a frame's decoder keeps
the input past the frame's end as a copy, so offering the whole rest of the file made reading a log of
n frames cost O(n²) (0.38 s for a log of 5,000 frames, now 0.05 s)."""


def _frames(data: bytes, path: Path) -> tuple[list[tuple[int, bytes]], int | None]:
    """Split a zstd file into ``(offset, plaintext)`` frames; an incomplete last frame is torn."""
    zstandard = _zstandard(path)
    decompressor = zstandard.ZstdDecompressor()
    frames: list[tuple[int, bytes]] = []
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        try:
            frame = _frame(decompressor, view, offset)
        except zstandard.ZstdError as exc:
            raise SessionPersistenceCorruptionError(f"{path}: damaged zstd frame at byte {offset}: {exc}") from None
        if frame is None:
            return frames, offset
        plain, offset_after = frame
        frames.append((offset, plain))
        offset = offset_after
    return frames, None


def _frame(decompressor: Any, view: memoryview, offset: int) -> tuple[bytes, int] | None:
    """The frame at ``offset``: its plaintext and where the next one starts (``None``: it is incomplete)."""
    dobj = decompressor.decompressobj()
    parts: list[bytes] = []
    start, size = offset, FRAME_READ
    while True:
        end = min(len(view), start + size)
        parts.append(dobj.decompress(view[start:end]))
        if dobj.eof:
            return b"".join(parts), end - len(dobj.unused_data)
        if end >= len(view):
            return None
        start, size = end, size * 2


def log_lines(data: bytes, path: Path, compressed: bool) -> tuple[list[tuple[int, bytes]], int | None, int]:
    """Complete lines with the offset a truncation to *before* them would use (plain: the line's start,
    zstd: its frame's start); plus the torn offset and the committed size. ``data`` may start at any
    line (plain) or frame (zstd) boundary, since batches are only ever appended."""
    if not compressed:
        lines: list[tuple[int, bytes]] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                torn = start if start < len(data) else None
                return lines, torn, start
            lines.append((start, data[start:end]))
            start = end + 1
    frames, torn = _frames(data, path)
    out: list[tuple[int, bytes]] = []
    for offset, plain in frames:
        for line in plain.split(b"\n")[:-1]:
            out.append((offset, line))
    committed = torn if torn is not None else len(data)
    return out, torn, committed


def log_text(data: bytes, path: Path, compressed: bool) -> bytes:
    """The lines of a stored log as one text: itself, or its zstd frames decompressed (a torn last frame left out)."""
    return b"".join(plain for _offset, plain in _frames(data, path)[0]) if compressed else data


def parse_log(data: bytes, path: Path, *, compressed: bool = False) -> StoredLog:
    """Parse a stored log, applying the torn-tail and corruption rules of spec 02 §9.5."""
    lines, torn, committed = log_lines(data, path, compressed)
    if not lines:
        raise SessionPersistenceCorruptionError(f"{path}: the log has no complete header line")
    header = decode_header(lines[0][1], path)
    events: list[Event] = []
    decoder = Decoder()
    for index in range(1, len(lines)):
        try:
            events.append(decoder.event(lines[index][1], len(events)))
        except SessionFormatUnsupportedError as exc:
            raise SessionFormatUnsupportedError(f"{path}: line {index + 1}: {exc}") from None
        except SessionLogError as exc:
            later = _later_turn_end(lines, index + 1, compressed)
            if later is not None:
                raise SessionPersistenceCorruptionError(
                    f"{path}: line {index + 1} is damaged ({exc}) but line {later} commits a later turn/end"
                ) from None
            return _cut_at_damage(header, events, lines, index, problem=str(exc), data=data, path=path, torn=torn)
    return StoredLog(header, events, committed, torn)


def decode_header(line: bytes, path: Path) -> dict[str, Any]:
    """The header record of line 1, version-gated and checked (02 §2); else the corruption error."""
    try:
        header = json.loads(line)
    except ValueError:
        raise SessionPersistenceCorruptionError(f"{path}: line 1 (header) is not valid JSON") from None
    if isinstance(header, dict):
        version_gate(header)
    problem = header_problem(header)
    if problem:
        raise SessionPersistenceCorruptionError(f"{path}: line 1: {problem}")
    return header  # type: ignore[no-any-return]


def _cut_at_damage(
    header: dict[str, Any],
    events: list[Event],
    lines: list[tuple[int, bytes]],
    index: int,
    *,
    problem: str,
    data: bytes,
    path: Path,
    torn: int | None,
) -> StoredLog:
    """Keep the events before the damaged line (plain) or before its frame (zstd); the rest is set aside."""
    cut = lines[index][0]
    if cut <= lines[0][0]:
        raise SessionPersistenceCorruptionError(f"{path}: line {index + 1} is damaged inside the header frame")
    first = next(i for i in range(1, len(lines)) if lines[i][0] >= cut)
    damage = Damage(index + 1, problem, len(lines) - first + (torn is not None), data[cut:])
    return StoredLog(header, events[: first - 1], cut, cut, damage)


def _later_turn_end(lines: list[tuple[int, bytes]], start: int, compressed: bool) -> int | None:
    for index in range(start, len(lines)):
        line = lines[index][1]
        if b'"turn/end"' not in line:
            continue
        try:
            if json.loads(line).get("type") == "turn/end":
                return index + 1
        except (ValueError, AttributeError):
            continue
    return None


# -- handles ---------------------------------------------------------------------------------


class JsonlHandle:
    """Read or write access to one stored session."""

    def __init__(
        self,
        store: JsonlPersistence,
        header: dict[str, Any],
        directory: Path,
        access: Access,
        *,
        inherited_event_count: int = 0,
        stored: StoredLog | None = None,
        path: Path | None = None,
    ) -> None:
        self.store = store
        self.id: str = header["id"]
        self.header = header
        self.access: Access = access
        self.inherited_event_count = inherited_event_count
        self.directory = directory
        self.path = path or directory / (ZSTD if store.compressed else PLAIN)
        self.compressed = self.path.name == ZSTD
        self._events: list[Event] = stored.events if stored else []
        self._size = stored.committed_size if stored else 0
        self._torn = stored.torn_offset if stored else None
        self._materialized = stored is not None
        self._opened = stored is not None
        self.count = len(self._events)
        self._buffer: list[Event] = []
        self._timer: asyncio.TimerHandle | None = None
        self._writer: asyncio.Task[None] | None = None
        self._paused = False
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self.closed = False
        self.stat_key: StatKey | None = None
        """``(st_ino, st_size, st_mtime_ns)`` of the log right after this handle's last durable write."""

    @property
    def durable(self) -> list[Event]:
        """Every event stored so far (read at open, then each durable batch); not to be modified."""
        return self._events

    async def read(self, offset: int = 0, length: int | None = None) -> list[Event]:
        self._check_open()
        end = None if length is None else offset + length
        return self._events[offset:end]

    def _check_open(self) -> None:
        if self.closed:
            raise SessionHandleClosedError(f'session "{self.id}" handle is closed')

    def append(self, events: list[Event]) -> None:
        self._check_open()
        if self.access != "write":
            raise SessionReadOnlyError(f'session "{self.id}" was opened read-only')
        if not events:
            return
        arm = not self._buffer and not self._paused
        self._buffer.extend(events)
        self.count += len(events)
        if arm:
            self._arm()

    def _arm(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._timer is None:
            self._timer = loop.call_later(BATCH_WINDOW_S, self._on_window)

    def _on_window(self) -> None:
        self._timer = None
        if self._buffer and not self.closed:
            self.store.track(asyncio.get_running_loop().create_task(self._background_drain()))

    async def _background_drain(self) -> None:
        try:
            await self._drain()
        except Exception as exc:
            self._paused = True
            log.warning('session "%s": background write failed, waiting for a flush: %s', self.id, exc)

    async def flush(self) -> None:
        """Durability barrier: drain the buffer now; raises if the write fails."""
        self._check_open()
        self._paused = False
        await self._drain()

    async def _drain(self) -> None:
        """Write everything buffered; the write runs in its own task so a cancelled caller cannot
        leave a batch both written and still buffered (which would write it twice)."""
        task = self._writer
        if task is None or task.done():
            if not self._buffer:
                return  # everything appended is on disk already (a barrier right after another)
            task = self._writer = asyncio.get_running_loop().create_task(self._write_buffer())
        await asyncio.shield(task)

    async def _write_buffer(self) -> None:
        while self._buffer:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch = list(self._buffer)
            payload = b"".join(encode_line(e) for e in batch)
            await self.store.workers.run(functools.partial(self._write, payload))
            del self._buffer[: len(batch)]
            self._events.extend(batch)
            self.store.stored(self, batch)

    # -- blocking work (worker thread) --------------------------------------------------------

    def _write(self, payload: bytes) -> None:
        """Append one batch and fsync it; on failure the file is cut back so a retry adds no duplicate."""
        if not self._materialized:
            self._materialize(payload)
            return
        if self._fd is None:
            self._fd = open_append(self.path)
        fd = self._fd
        data = self.store.frame(payload, self.compressed)
        try:
            self._check_owned(fd)
            if self._torn is not None:
                os.ftruncate(fd, self._torn)
                self._size = self._torn
                self._torn = None
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            self._torn = self._size
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise io_error(self.path, "appending to the session log", exc) from None
        self._size += len(data)
        self.stat_key = stat_key(os.fstat(fd))

    def _check_owned(self, fd: int) -> None:
        """The log and lock paths still name the files this writer holds (else another took over)."""
        for held, path in ((fd, self.path), (self._lock_fd, self.directory / LOCK)):
            if held is None:
                continue
            try:
                same = _same_file(os.fstat(held), os.stat(path))
            except FileNotFoundError:
                same = False
            if not same:
                raise SessionOwnershipLostError(
                    f"{path} was removed or replaced by another process; "
                    f'session "{self.id}" is no longer written by this process'
                )

    def _materialize(self, payload: bytes) -> None:
        """Publish header and first batch atomically (temp file, fsync, link, directory fsyncs)."""
        header_line = json.dumps(self.header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        data = self.store.frame(header_line, self.compressed) + self.store.frame(payload, self.compressed)
        tmp = self.path.with_name(f"{self.path.name}.{os.urandom(6).hex()}.tmp")
        try:
            private_dir(self.directory)
            self._lock()
            write_new_file(tmp, data)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                raise SessionAlreadyExistsError(f'session "{self.id}" already exists at {self.path}') from None
            try:
                fsync_dir(self.directory)
                fsync_dir(self.directory.parent)
            except OSError:
                self.path.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise io_error(self.path, "creating the session log", exc, writing=True) from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        self._materialized = True
        self._size = len(data)
        with contextlib.suppress(OSError):
            self.stat_key = stat_key(os.stat(self.path))

    def _lock(self) -> None:
        if self._lock_fd is None:
            self._lock_fd = acquire_lock(self.directory / LOCK, self.id)

    async def discard(self) -> None:
        """Close without writing what is buffered; a log this handle created is removed."""
        if self.closed:
            return
        self._buffer.clear()
        if self._materialized and not self._opened:
            self.path.unlink(missing_ok=True)
        await self.close()

    async def close(self) -> None:
        if self.closed:
            return
        try:
            if self.access == "write":
                self._paused = False
                await self._drain()
        finally:
            self.closed = True
            if self._timer is not None:
                self._timer.cancel()
            for fd in (self._fd, self._lock_fd):
                if fd is not None:
                    os.close(fd)
            self._fd = self._lock_fd = None
            self.store.forget(self)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (mode 0600, never an existing file) holding ``data``, fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


StatKey = tuple[int, int, int]
"""``(st_ino, st_size, st_mtime_ns)``: what tells a changed log from an unchanged one without reading it."""


def stat_key(st: os.stat_result) -> StatKey:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


_NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def io_error(path: Path, action: str, exc: OSError, *, writing: bool = False) -> SessionError:
    """One line naming the file, what failed and the errno; a refused write is ``SessionReadOnlyError``."""
    code = errno.errorcode.get(exc.errno or 0)
    reason = f"{code}: {exc.strerror}" if code else str(exc)
    if exc.filename is not None and str(exc.filename) != str(path):
        reason += f": {exc.filename}"
    message = f"{path}: {action} failed ({reason})"
    if writing and exc.errno in _NOT_WRITABLE:
        return SessionReadOnlyError(message)
    return SessionPersistenceIOError(message)


_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@contextlib.contextmanager
def open_log(path: Path) -> Iterator[BinaryIO]:
    """Read a stored log; a FIFO, directory or device in its place is refused, never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise io_error(path, "opening the session log", exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise SessionPersistenceIOError(f"{path}: is {kind}, not a session log file; refusing to read it")
    with os.fdopen(fd, "rb") as fh:
        try:
            yield fh
        except OSError as exc:
            raise io_error(path, "reading the session log", exc) from None


def open_append(path: Path) -> int:
    """The append descriptor of a stored log; a log that cannot be written is refused here."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        raise io_error(path, "opening the session log for appending", exc, writing=True) from None


def set_aside(path: Path, fd: int, damage: Damage, keep: int) -> None:
    """Move what follows a damaged line into a 0600 file beside the log, then cut the log to ``keep`` bytes."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    side = path.with_name(f"{path.name}.set-aside-{stamp}")
    try:
        write_new_file(side, damage.data)
        fsync_dir(path.parent)
        os.ftruncate(fd, keep)
        os.fsync(fd)
    except OSError as exc:
        raise io_error(path, "setting aside the lines after a damaged line", exc, writing=True) from None
    log.warning(
        "%s: line %d is damaged (%s) and no later turn/end commits it; %d line(s) from there on were set aside in %s",
        path,
        damage.line,
        damage.problem,
        damage.lines,
        side.name,
    )


def acquire_lock(lock_path: Path, session_id: str) -> int:
    """Take the exclusive ``flock`` of ``session.lock`` (created if absent, never deleted)."""
    for _attempt in range(3):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise io_error(lock_path, "taking the session lock", exc, writing=True) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionAlreadyOwnedError(f'session "{session_id}" is already owned by another writer') from None
        try:
            same = _same_file(os.fstat(fd), os.stat(lock_path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
    raise SessionAlreadyOwnedError(f'session "{session_id}": its lock file keeps changing; another writer owns it')


# -- the store -------------------------------------------------------------------------------


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    root: str
    compression: str = "zstd"
    """The reference's default too: a row config that names only ``root`` writes what it would."""


class JsonlPersistence:
    """The ``session_persistence`` service of the JSONL backend."""

    def __init__(self, root: Path, *, compression: str = "none") -> None:
        if compression not in ("none", "zstd"):
            raise ValueError(f'compression must be "none" or "zstd", got "{compression}"')
        self.root = root
        self.compressed = compression == "zstd"
        self._handles: dict[str, JsonlHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._compressor: zstandard.ZstdCompressor | None = None
        self._compressing = threading.Lock()
        self.workers = Workers(min(32, (os.cpu_count() or 1) + 4))
        """The threads of the log writes (as many as ``asyncio.to_thread``'s executor would use)."""
        self.observers: builtins.list[Callable[[JsonlHandle, builtins.list[Event]], None]] = []
        """Called on the loop after each durable batch of a write handle (the session index follows them)."""

    def stored(self, handle: JsonlHandle, batch: builtins.list[Event]) -> None:
        """Tell the observers that ``batch`` reached the disk; an observer's failure never fails a write."""
        for observer in self.observers:
            try:
                observer(handle, batch)
            except Exception:
                log.warning('session "%s": an observer of stored batches failed', handle.id, exc_info=True)

    def frame(self, payload: bytes, compressed: bool) -> bytes:
        """``payload`` as written to a log of that encoding: itself, or one checksummed zstd frame at ``LEVEL``.

        Batches up to ``SMALL_BATCH`` bytes (nearly all of them) share one kept compressor; handles write
        from worker threads and a compressor is not thread-safe, so those take turns. A larger batch gets a
        compressor of its own: a compressor keeps the workspace of the largest input it saw (10 MB after a
        5 MB answer's batch). ``zstandard`` is imported here, on the first compressed write, to keep it off
        the start path.
        """
        if not compressed:
            return payload
        import zstandard

        if len(payload) > SMALL_BATCH:
            return zstandard.ZstdCompressor(level=LEVEL, write_checksum=True).compress(payload)
        with self._compressing:
            if self._compressor is None:
                self._compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
            return self._compressor.compress(payload)

    def track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def forget(self, handle: JsonlHandle) -> None:
        if self._handles.get(handle.id) is handle:
            del self._handles[handle.id]

    # -- locating sessions ------------------------------------------------------------------

    def directory_for(self, header: dict[str, Any]) -> Path:
        return self.root / project_key(header.get("cwd")) / encode_segment(header["id"])

    def find(self, session_id: str) -> Path | None:
        """The directory holding ``session_id``'s log, looked up across every cwd key (blocking)."""
        segment = encode_segment(session_id)
        try:
            if not self.root.is_dir():
                return None
            for key_dir in self.root.iterdir():
                candidate = key_dir / segment
                if os.path.lexists(candidate / PLAIN) or os.path.lexists(candidate / ZSTD):
                    return candidate
        except OSError as exc:
            raise io_error(self.root, "looking up a session in the store", exc) from None
        return None

    async def _located(self, session_id: str) -> Path:
        directory = await asyncio.to_thread(self.find, session_id)
        if directory is None:
            raise SessionPersistenceNotFoundError(f'session "{session_id}" not found')
        return directory

    def log_file(self, session_id: str) -> Path | None:
        """The file of ``session_id``'s stored log, ``None`` when none is stored (blocking)."""
        directory = self.find(session_id)
        return self._log_path(directory) if directory is not None else None

    async def exists(self, session_id: str) -> bool:
        """Whether a log of ``session_id`` is stored (the directory scan runs in a worker thread)."""
        return await asyncio.to_thread(self.find, session_id) is not None

    def _log_path(self, directory: Path) -> Path:
        plain, zstd = directory / PLAIN, directory / ZSTD
        try:
            has_plain, has_zstd = os.path.lexists(plain), os.path.lexists(zstd)
        except OSError as exc:
            raise io_error(directory, "looking up the session log", exc) from None
        if has_plain and has_zstd:
            raise SessionPersistenceCorruptionError(f"{directory}: both {PLAIN} and {ZSTD} exist")
        return zstd if has_zstd else plain

    def read_stored(self, directory: Path, session_id: str) -> tuple[Path, StoredLog]:
        """The parsed log in ``directory`` (blocking)."""
        path = self._log_path(directory)
        with open_log(path) as fh:
            data = fh.read()
        with collector_paused():
            stored = parse_log(data, path, compressed=path.name == ZSTD)
        if stored.header["id"] != session_id:
            raise SessionPersistenceCorruptionError(f"{path}: header id {stored.header['id']!r} does not match")
        return path, stored

    def _open_writer(self, directory: Path, session_id: str) -> tuple[Path, StoredLog, int, int]:
        """Lock, read and open the log for appending (blocking); damaged lines are set aside first."""
        lock_fd = acquire_lock(directory / LOCK, session_id)
        try:
            path, stored = self.read_stored(directory, session_id)
            fd = open_append(path)
        except BaseException:
            os.close(lock_fd)
            raise
        try:
            if stored.damage is not None:
                set_aside(path, fd, stored.damage, stored.committed_size)
                stored.torn_offset = None
        except BaseException:
            os.close(fd)
            os.close(lock_fd)
            raise
        return path, stored, lock_fd, fd

    # -- the seam ---------------------------------------------------------------------------

    async def create(self, header: dict[str, Any], *, inherited_event_count: int = 0) -> JsonlHandle:
        """A write handle for a new session; nothing is written until its first flush."""
        if header["id"] in self._handles or await self.exists(header["id"]):
            raise SessionAlreadyExistsError(f'session "{header["id"]}" already exists')
        handle = JsonlHandle(
            self, header, self.directory_for(header), "write", inherited_event_count=inherited_event_count
        )
        self._handles[handle.id] = handle
        return handle

    async def open(self, session_id: str, access: Access) -> JsonlHandle:
        """A handle on a stored session; ``write`` takes the single-writer lock and checks the log is writable."""
        if access == "write" and session_id in self._handles:
            raise SessionAlreadyOwnedError(f'session "{session_id}" is already open for writing')
        directory = await self._located(session_id)
        if access == "read":
            path, stored = await asyncio.to_thread(self.read_stored, directory, session_id)
            return self._handle(path, stored, access)
        path, stored, lock_fd, fd = await asyncio.to_thread(self._open_writer, directory, session_id)
        handle = self._handle(path, stored, access)
        handle._lock_fd, handle._fd = lock_fd, fd
        self._handles[session_id] = handle
        return handle

    def _handle(self, path: Path, stored: StoredLog, access: Access) -> JsonlHandle:
        """A handle on a stored log; appends keep the encoding the file already has."""
        count = inherited_event_count(stored.events) if stored.header["isSeeded"] else 0
        return JsonlHandle(
            self, stored.header, path.parent, access, inherited_event_count=count, stored=stored, path=path
        )

    async def flush(self) -> None:
        await asyncio.gather(*(h.flush() for h in list(self._handles.values())))

    async def close_all(self) -> None:
        errors = []
        for handle in list(self._handles.values()):
            try:
                await handle.close()
            except Exception as exc:
                errors.append(exc)
        self.workers.close()
        if errors:
            raise ExceptionGroup("closing session logs failed", errors)

    async def stat(self, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._stat_dir, await self._located(session_id))

    def _stat_dir(self, directory: Path) -> dict[str, Any]:
        header, size = read_head(self._log_path(directory))
        return {"header": header, "revision": size}

    async def list(self) -> builtins.list[dict[str, Any]]:
        """Headers of every stored session (only the first line of each log is read)."""
        return await asyncio.to_thread(self._list_sync)

    def _list_sync(self) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        if not self.root.is_dir():
            return out
        with os.scandir(self.root) as keys:
            key_dirs = [Path(entry.path) for entry in keys if entry.is_dir()]
        for key_dir in key_dirs:
            with os.scandir(key_dir) as entries:
                directories = [Path(entry.path) for entry in entries]
            for directory in directories:
                try:
                    out.append(self._stat_dir(directory))
                except (OSError, SessionError):
                    continue
        return out

    def scan_logs(self) -> builtins.list[tuple[Path, os.stat_result]]:
        """Every stored log file with its ``stat`` (blocking; nothing is read, one or two ``stat`` per session).

        A session folder holding both encodings is left out, as ``list`` leaves it out."""
        out: builtins.list[tuple[Path, os.stat_result]] = []
        try:
            with os.scandir(self.root) as keys:
                key_dirs = [entry.path for entry in keys if entry.is_dir()]
        except FileNotFoundError:
            return out
        except OSError as exc:
            raise io_error(self.root, "scanning the session store", exc) from None
        for key_dir in key_dirs:
            try:
                with os.scandir(key_dir) as entries:
                    directories = [entry.path for entry in entries]
            except OSError:
                continue
            for directory in directories:
                found = [(name, st) for name in (PLAIN, ZSTD) if (st := _stat(os.path.join(directory, name)))]
                if len(found) == 1 and stat.S_ISREG(found[0][1].st_mode):
                    out.append((Path(directory, found[0][0]), found[0][1]))
        return out

    # -- binding live sessions --------------------------------------------------------------

    def bind(self, session: Session, handle: SessionHandle) -> None:
        """Copy ``session``'s not-yet-stored events into ``handle`` and follow its appends."""
        if not isinstance(handle, JsonlHandle) or handle.store is not self:
            raise TypeError(f'session "{session.id}": the handle belongs to another persistence store')
        handle.append(session.events[handle.count :])
        self._handles[session.id] = handle

    def handle_of(self, session_id: str) -> JsonlHandle | None:
        return self._handles.get(session_id)


def _stat(path: str) -> os.stat_result | None:
    """``stat`` of ``path``, or ``None`` when it cannot be seen (missing or unreadable)."""
    try:
        return os.stat(path)
    except OSError:
        return None


HEADER_LIMIT = 65536
"""Most bytes read for the zstd frame holding the header line."""


def read_header(path: Path) -> dict[str, Any]:
    """The header of a stored log, reading only its first line (or first zstd frame)."""
    return read_head(path)[0]


def read_head(path: Path) -> tuple[dict[str, Any], int]:
    """The header of a stored log and the log's size in bytes, decoding nothing past the header."""
    with open_log(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        head = _header_frame(fh, path) if path.name == ZSTD else fh.readline()
    if not head.endswith(b"\n"):
        raise SessionPersistenceCorruptionError(f"{path}: no complete header line")
    return decode_header(head, path), size


def _header_frame(fh: BinaryIO, path: Path) -> bytes:
    """The plaintext of the first zstd frame (the header line); empty when that frame is incomplete."""
    zstandard = _zstandard(path)
    reader = zstandard.ZstdDecompressor().decompressobj()
    plain = b""
    read = 0
    while not reader.eof and read < HEADER_LIMIT:
        chunk = fh.read(min(4096, HEADER_LIMIT - read))
        if not chunk:
            return b""
        try:
            plain += reader.decompress(chunk)
        except zstandard.ZstdError as exc:
            raise SessionPersistenceCorruptionError(f"{path}: damaged zstd frame at byte 0: {exc}") from None
        read += len(chunk)
    return plain if reader.eof else b""


name = "session-persistence-jsonl"
inject = (SESSIONS,)


def apply(ctx: Context, config: Config) -> None:
    """Provide ``session_persistence`` and copy committed events into their write handles."""
    store = JsonlPersistence(Path(config.root).expanduser(), compression=config.compression)
    seam: SessionPersistence = store
    ctx.provide(SESSION_PERSISTENCE, seam)

    def on_event(session: Session, event: Event) -> None:
        handle = store.handle_of(session.id)
        if handle is not None and not handle.closed:
            handle.append([event])

    async def on_flush(session: Session) -> None:
        handle = store.handle_of(session.id)
        if handle is not None and not handle.closed:
            await handle.flush()

    ctx.on(SESSION_EVENT, on_event)
    ctx.on(SESSION_FLUSH, on_flush)
    ctx.effect(lambda: store.close_all)
