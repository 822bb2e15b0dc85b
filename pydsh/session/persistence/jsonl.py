"""JSONL persistence: one ``session.v4.jsonl`` per session, a single writer, batched fsyncs (spec 02 §9).

Layout: ``<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.v4.jsonl`` plus ``session.lock``.
Nothing touches the disk before the first flush; the first write publishes header and batch
atomically (temp file, fsync, link). Appends are batched for 200 ms or until a flush barrier.
A torn last line is never returned and is truncated before the next append; a damaged line
followed by a committed ``turn/end`` is corruption, never skipped.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import fcntl
import itertools
import json
import logging
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.kernel.context import Context
from pydsh.kernel.profiles import private_dir
from pydsh.session.errors import (
    SessionAlreadyExistsError,
    SessionAlreadyOwnedError,
    SessionFormatUnsupportedError,
    SessionHandleClosedError,
    SessionLogError,
    SessionPersistenceCorruptionError,
    SessionPersistenceNotFoundError,
    SessionReadOnlyError,
)
from pydsh.session.events import Event, check_envelope, header_problem, inherited_event_count, version_gate
from pydsh.session.log import Session
from pydsh.session.persistence.base import Access, SessionHandle, SessionPersistence

BATCH_WINDOW_S = 0.2
PLAIN = "session.v4.jsonl"
ZSTD = "session.v4.jsonl.zstd"
LOCK = "session.lock"
log = logging.getLogger("pydsh.session.persistence")

try:
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - orjson is an optional accelerator
    _loads = json.loads


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


def decode_event(line: bytes, seq: int) -> Event:
    try:
        event = _loads(line)
    except ValueError as exc:
        raise SessionLogError(seq, f"unparsable line ({exc})") from None
    if isinstance(event, dict) and "sourceEventSeqs" in event:
        event["sourceEventSeqs"] = decode_ranges(event["sourceEventSeqs"], seq)
    return check_envelope(event, seq)


# -- reading ---------------------------------------------------------------------------------


@dataclass
class StoredLog:
    header: dict[str, Any]
    events: list[Event]
    committed_size: int
    torn_offset: int | None


def _frames(data: bytes, path: Path) -> tuple[list[tuple[int, bytes]], int | None]:
    """Split a zstd file into ``(offset, plaintext)`` frames; an incomplete last frame is torn."""
    try:
        import zstandard
    except ImportError:
        raise SessionFormatUnsupportedError(
            f"{path} is zstd-compressed; install the zstandard package to read it"
        ) from None
    frames: list[tuple[int, bytes]] = []
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        try:
            plain = dobj.decompress(view[offset:])
        except zstandard.ZstdError as exc:
            raise SessionPersistenceCorruptionError(f"{path}: damaged zstd frame at byte {offset}: {exc}") from None
        if not dobj.eof:
            return frames, offset
        consumed = len(data) - offset - len(dobj.unused_data)
        frames.append((offset, plain))
        offset += consumed
    return frames, None


def _lines(data: bytes, path: Path, compressed: bool) -> tuple[list[tuple[int, bytes]], int | None, int]:
    """Complete lines with the offset a truncation to *before* them would use; plus torn offset."""
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


def parse_log(data: bytes, path: Path, *, compressed: bool = False) -> StoredLog:
    """Parse a stored log, applying the torn-tail and corruption rules of spec 02 §9.5."""
    lines, torn, committed = _lines(data, path, compressed)
    if not lines:
        raise SessionPersistenceCorruptionError(f"{path}: the log has no complete header line")
    try:
        header = _loads(lines[0][1])
    except ValueError:
        raise SessionPersistenceCorruptionError(f"{path}: line 1 (header) is not valid JSON") from None
    if isinstance(header, dict):
        version_gate(header)
    problem = header_problem(header)
    if problem:
        raise SessionPersistenceCorruptionError(f"{path}: line 1: {problem}")
    events: list[Event] = []
    for index in range(1, len(lines)):
        offset, line = lines[index]
        try:
            events.append(decode_event(line, len(events)))
        except SessionFormatUnsupportedError as exc:
            raise SessionFormatUnsupportedError(f"{path}: line {index + 1}: {exc}") from None
        except SessionLogError as exc:
            later = _later_turn_end(lines, index + 1, compressed)
            if later is not None:
                raise SessionPersistenceCorruptionError(
                    f"{path}: line {index + 1} is damaged ({exc}) but line {later} commits a later turn/end"
                ) from None
            return StoredLog(header, events, offset, offset)
    return StoredLog(header, events, committed, torn)


def _later_turn_end(lines: list[tuple[int, bytes]], start: int, compressed: bool) -> int | None:
    for index in range(start, len(lines)):
        line = lines[index][1]
        if b'"turn/end"' not in line:
            continue
        try:
            if _loads(line).get("type") == "turn/end":
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
    ) -> None:
        self.store = store
        self.id: str = header["id"]
        self.header = header
        self.access: Access = access
        self.inherited_event_count = inherited_event_count
        self.directory = directory
        self.path = directory / (ZSTD if store.compressed else PLAIN)
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
            task = self._writer = asyncio.get_running_loop().create_task(self._write_buffer())
        await asyncio.shield(task)

    async def _write_buffer(self) -> None:
        while self._buffer:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            batch = list(self._buffer)
            payload = b"".join(encode_line(e) for e in batch)
            await asyncio.to_thread(self._write, payload)
            del self._buffer[: len(batch)]
            self._events.extend(batch)

    # -- blocking work (worker thread) --------------------------------------------------------

    def _write(self, payload: bytes) -> None:
        if not self._materialized:
            self._materialize(payload)
            return
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        fd = self._fd
        if self._torn is not None:
            os.ftruncate(fd, self._torn)
            self._size = self._torn
            self._torn = None
        data = self.store.frame(payload)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise
        self._size += len(data)

    def _materialize(self, payload: bytes) -> None:
        private_dir(self.directory)
        self._lock()
        header_line = json.dumps(self.header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        data = self.store.frame(header_line) + self.store.frame(payload)
        tmp = self.path.with_name(f"{self.path.name}.{secrets.token_hex(6)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            raise SessionAlreadyExistsError(f'session "{self.id}" already exists at {self.path}') from None
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.directory)
        _fsync_dir(self.directory.parent)
        self._materialized = True
        self._size = len(data)

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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def acquire_lock(lock_path: Path, session_id: str) -> int:
    """Take the exclusive ``flock`` of ``session.lock`` (created if absent, never deleted)."""
    for _attempt in range(3):
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionAlreadyOwnedError(f'session "{session_id}" is already owned by another writer') from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
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
    compression: str = "none"


class JsonlPersistence:
    """The ``session_persistence`` service of the JSONL backend."""

    def __init__(self, root: Path, *, compression: str = "none") -> None:
        if compression not in ("none", "zstd"):
            raise ValueError(f'compression must be "none" or "zstd", got "{compression}"')
        self.root = root
        self.compressed = compression == "zstd"
        self._handles: dict[str, JsonlHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._compressor: Any = None
        if self.compressed:
            import zstandard

            self._compressor = zstandard.ZstdCompressor(write_checksum=True)

    def frame(self, payload: bytes) -> bytes:
        return self._compressor.compress(payload) if self._compressor is not None else payload

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
        if not self.root.is_dir():
            return None
        for key_dir in self.root.iterdir():
            candidate = key_dir / segment
            if (candidate / PLAIN).exists() or (candidate / ZSTD).exists():
                return candidate
        return None

    async def _located(self, session_id: str) -> Path:
        directory = await asyncio.to_thread(self.find, session_id)
        if directory is None:
            raise SessionPersistenceNotFoundError(f'session "{session_id}" not found')
        return directory

    async def exists(self, session_id: str) -> bool:
        """Whether a log of ``session_id`` is stored (the directory scan runs in a worker thread)."""
        return await asyncio.to_thread(self.find, session_id) is not None

    def _log_path(self, directory: Path) -> Path:
        plain, zstd = directory / PLAIN, directory / ZSTD
        if plain.exists() and zstd.exists():
            raise SessionPersistenceCorruptionError(f"{directory}: both {PLAIN} and {ZSTD} exist")
        found = zstd if zstd.exists() else plain
        if (found is zstd) != self.compressed:
            raise SessionFormatUnsupportedError(f"{found}: this store is configured for the other encoding")
        return found

    def read_stored(self, session_id: str) -> tuple[Path, StoredLog]:
        directory = self.find(session_id)
        if directory is None:
            raise SessionPersistenceNotFoundError(f'session "{session_id}" not found')
        path = self._log_path(directory)
        stored = parse_log(path.read_bytes(), path, compressed=path.name == ZSTD)
        if stored.header["id"] != session_id:
            raise SessionPersistenceCorruptionError(f"{path}: header id {stored.header['id']!r} does not match")
        return directory, stored

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
        """A handle on a stored session; ``write`` takes the single-writer lock first."""
        lock_fd: int | None = None
        if access == "write":
            if session_id in self._handles:
                raise SessionAlreadyOwnedError(f'session "{session_id}" is already open for writing')
            found = await self._located(session_id)
            lock_fd = await asyncio.to_thread(acquire_lock, found / LOCK, session_id)
        try:
            directory, stored = await asyncio.to_thread(self.read_stored, session_id)
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        handle = JsonlHandle(
            self,
            stored.header,
            directory,
            access,
            inherited_event_count=inherited_event_count(stored.events),
            stored=stored,
        )
        if lock_fd is not None:
            handle._lock_fd = lock_fd
            self._handles[session_id] = handle
        return handle

    async def flush(self) -> None:
        await asyncio.gather(*(h.flush() for h in list(self._handles.values())))

    async def close_all(self) -> None:
        errors = []
        for handle in list(self._handles.values()):
            try:
                await handle.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise ExceptionGroup("closing session logs failed", errors)

    async def stat(self, session_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(self._stat_dir, await self._located(session_id))

    def _stat_dir(self, directory: Path) -> dict[str, Any]:
        path = self._log_path(directory)
        return {"header": read_header(path), "revision": path.stat().st_size}

    async def list(self) -> builtins.list[dict[str, Any]]:
        """Headers of every stored session (only the first line of each log is read)."""
        return await asyncio.to_thread(self._list_sync)

    def _list_sync(self) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        if not self.root.is_dir():
            return out
        for key_dir in self.root.iterdir():
            if not key_dir.is_dir():
                continue
            for directory in key_dir.iterdir():
                try:
                    out.append(self._stat_dir(directory))
                except (OSError, SessionPersistenceCorruptionError, SessionFormatUnsupportedError):
                    continue
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


def read_header(path: Path) -> dict[str, Any]:
    """The header of a stored log, reading only its first line (or first zstd frame)."""
    if path.name == ZSTD:
        with path.open("rb") as fh:
            head = fh.read(65536)
        frames, _torn = _frames(head, path)
        first = frames[0][1] if frames else b""
    else:
        with path.open("rb") as fh:
            first = fh.readline()
    if not first.endswith(b"\n"):
        raise SessionPersistenceCorruptionError(f"{path}: no complete header line")
    header = _loads(first)
    if isinstance(header, dict):
        version_gate(header)
    problem = header_problem(header)
    if problem:
        raise SessionPersistenceCorruptionError(f"{path}: line 1: {problem}")
    return header  # type: ignore[no-any-return]


name = "session-persistence-jsonl"
inject = ("sessions",)


def apply(ctx: Context, config: Config) -> None:
    """Provide ``session_persistence`` and copy committed events into their write handles."""
    store = JsonlPersistence(Path(config.root).expanduser(), compression=config.compression)
    seam: SessionPersistence = store
    ctx.provide("session_persistence", seam)

    def on_event(session: Session, event: Event) -> None:
        handle = store.handle_of(session.id)
        if handle is not None and not handle.closed:
            handle.append([event])

    async def on_flush(session: Session) -> None:
        handle = store.handle_of(session.id)
        if handle is not None and not handle.closed:
            await handle.flush()

    ctx.on("session/event", on_event)
    ctx.on("session/flush", on_flush)
    ctx.effect(lambda: store.close_all)
