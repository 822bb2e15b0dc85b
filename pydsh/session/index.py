"""The session index: what session lists show of every stored log, kept in a small SQLite file.

Never the source of truth, always a cache of the logs. Each row records the log file it was folded
from (inode, size, mtime) and how many of its bytes the fold covers. Every listing first scans the
store (a ``stat`` per log, nothing read): a new log gets a row from its header at once, a changed one
is marked pending, and a pending row is refolded from where its fold stopped (logs are only ever
appended to) or, when the bytes it folded changed, from the start. The rows a listing returns are
folded before it answers; a background task folds the others. The logs this process writes update
their rows as their batches reach the disk (in memory, written to SQLite at most once a second and
before each listing), so a listing seldom reads a log at all.

A damaged index file is rebuilt, and one that cannot be used (locked past the busy timeout,
unwritable, from a newer pydsh) is replaced by an in-memory index for the rest of the process, each
with one warning: listing never fails because of the index. Processes sharing one ``DSH_HOME`` share
the file (WAL journal, busy timeout, small transactions); every row describes itself, so whichever
process writes a row last, the next scan that sees the log differ from it folds the log again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.kernel.profiles import private_dir
from pydsh.session.errors import SessionError
from pydsh.session.events import Event
from pydsh.session.keys import SESSION_INDEX, SESSION_PERSISTENCE, SESSION_TITLE
from pydsh.session.persistence.jsonl import (
    ZSTD,
    JsonlHandle,
    JsonlPersistence,
    StatKey,
    decode_header,
    log_lines,
    log_text,
    open_log,
    read_head,
    stat_key,
)
from pydsh.session.summary import Fallback, SummaryFold

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger("pydsh.session.index")
T = TypeVar("T")

SCHEMA_VERSION = 2
"""2: the summary fold follows the kept inbox (an offline session's queued prompts); older rows are refolded."""
TAIL_BYTES = 32
"""How many of the last folded bytes a row keeps, to tell an appended log from a rewritten one."""
FLUSH_DELAY_S = 1.0
FOLD_BATCH = 32
BACKGROUND_DELAY_S = 0.3
"""The background folds only this long after the last listing, so it never slows one down."""
SHARED_LIMIT = 64
SQL_VARIABLES = 500
MTIME_SLACK_MS = 1000
"""How far a log's last event may lie after its modification time (file times come from a coarse
clock; a shared home may sit on another machine's disk): a pending row's key adds it, so that folding
a row only ever lowers its key and a page cut after folding its rows skips no row."""
PAGE_FOLD_BUDGET = 64
"""How many logs a page may fold to put its rows in exact order (at least twice its size)."""
DAMAGED_CODES = frozenset({11, 26})
"""``SQLITE_CORRUPT`` and ``SQLITE_NOTADB``: a file to rebuild rather than to go around."""
SQLITE_BUSY = 5
BUSY_RETRY_S = 0.05
"""How long a busy index waits before trying an operation again (within its busy timeout)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    path TEXT PRIMARY KEY,
    store TEXT NOT NULL,
    id TEXT NOT NULL,
    header TEXT NOT NULL,
    cwd TEXT NOT NULL,
    root INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    title TEXT,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    folded INTEGER NOT NULL,
    tail BLOB,
    fold TEXT,
    pending INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_recent ON sessions (store, root, updated_at DESC, id);
CREATE INDEX IF NOT EXISTS sessions_id ON sessions (id);
"""
COLUMNS = "path, id, header, ino, size, mtime_ns, folded, tail, fold, pending"
INSERT = "INSERT OR REPLACE INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


class IndexUnavailable(PydshError):
    """The index file cannot be used (the message names it and says why)."""


@dataclass(frozen=True)
class IndexEntry:
    """One stored session as the index knows it."""

    path: str
    id: str
    header: dict[str, Any]
    key: StatKey
    """The log's ``(st_ino, st_size, st_mtime_ns)`` when the row was last checked against it."""
    folded: int
    """Bytes of the log the fold covers (0: nothing folded yet)."""
    tail: bytes | None
    """The last bytes folded (``None`` when the row came from this process's own writes)."""
    fold: SummaryFold | None
    pending: bool
    """The fold does not cover the log as it was last seen."""

    @property
    def updated_at(self) -> int:
        """Time of the last event folded; while pending, an upper bound: the log's modification time
        plus ``MTIME_SLACK_MS``."""
        created = int(self.header.get("createdAt") or 0)
        folded = self.fold.updated_at if self.fold is not None else 0
        if not self.pending:
            return folded or created
        return max(created, folded, self.key[2] // 1_000_000 + MTIME_SLACK_MS)


# -- folding a log ------------------------------------------------------------------------------


def fold_log(path: Path, entry: IndexEntry, fallback: Fallback | None, shared: dict[bytes, Any]) -> IndexEntry:
    """``entry`` refolded from its log (blocking): from where it stopped when those bytes are unchanged,
    else from the start. Folding stops before a line (zstd: a frame) that does not parse."""
    with open_log(path) as fh:
        st = os.fstat(fh.fileno())
        start = _resume_offset(entry, st)
        back = min(TAIL_BYTES, start)
        fh.seek(start - back)
        chunk = fh.read()
        if start and entry.tail is not None and chunk[:back] != entry.tail:
            start = back = 0
            fh.seek(0)
            chunk = fh.read()
    compressed = path.name == ZSTD
    resumed = entry.fold if start else None
    if resumed is not None:
        header, fold = entry.header, SummaryFold.restore(resumed.state())
        lines, _torn, committed = log_lines(chunk[back:], path, compressed)
        folded = start + _fold_units(fold, lines, 0, committed, fallback=fallback, shared=shared)
    else:
        lines, _torn, committed = log_lines(chunk, path, compressed)
        if not lines:
            raise SessionError(f"{path}: the log has no complete header line")
        header, fold = decode_header(lines[0][1], path), SummaryFold()
        folded = _fold_units(fold, lines, 1, committed, fallback=fallback, shared=shared)
    kept = chunk[: back + folded - start]
    return IndexEntry(str(path), header["id"], header, stat_key(st), folded, kept[-TAIL_BYTES:], fold, False)


def title_fold(path: Path, fallback: Fallback | None) -> SummaryFold:
    """The title part of a log's fold, without folding the rest (blocking): every ``session/title`` line,
    else the ``user/message`` lines up to the first eligible prompt. Titles of logs never folded (a first
    listing over an old store or the reference runtime's logs) cost one search of the text, not a fold."""
    with open_log(path) as fh:
        text = log_text(fh.read(), path, path.name == ZSTD)
    fold = SummaryFold()
    for line in _lines_of(text, b"session/title"):
        _apply_line(fold, line, fallback)
    if fold.title is None:
        for line in _lines_of(text, b"user/message"):
            _apply_line(fold, line, fallback)
            if fold.prompt is not None:
                break
    return fold


def _lines_of(text: bytes, etype: bytes) -> Iterator[bytes]:
    """The complete lines of ``text`` whose type is ``etype`` (written first, as every log writer does), in order."""
    needle = b'\n{"type":"' + etype + b'"'
    at = text.find(needle)
    while at >= 0:
        end = text.find(b"\n", at + 1)
        if end < 0:
            return
        yield text[at + 1 : end]
        at = text.find(needle, end)


def _apply_line(fold: SummaryFold, line: bytes, fallback: Fallback | None) -> None:
    """Apply one line's event to ``fold`` unless it does not parse (a damaged line is skipped)."""
    try:
        event = json.loads(line)
    except ValueError:
        return
    if isinstance(event, dict) and type(event.get("seq")) is int and isinstance(event.get("type"), str):
        fold.apply(event, fallback)


def _resume_offset(entry: IndexEntry, st: os.stat_result) -> int:
    """Where the fold of ``entry`` may go on: its end when the log is the same file and no shorter, else 0."""
    if entry.fold is None or entry.folded <= 0 or st.st_ino != entry.key[0] or st.st_size < entry.folded:
        return 0
    return entry.folded


def _fold_units(
    fold: SummaryFold,
    lines: list[tuple[int, bytes]],
    first: int,
    committed: int,
    *,
    fallback: Fallback | None,
    shared: dict[bytes, Any],
) -> int:
    """Fold ``lines[first:]`` unit by unit (plain: a line, zstd: the lines of one frame, which share
    an offset); returns the offset up to which everything folded, stopping before a unit that does not parse."""
    count = len(lines)
    done = lines[first][0] if first < count else committed
    i = first
    while i < count:
        j = i + 1
        while j < count and lines[j][0] == lines[i][0]:
            j += 1
        items: list[str | Event] = []
        for k in range(i, j):
            item = _item(lines[k][1], fold, shared, k == count - 1)
            if item is None:
                return done
            items.append(item)
        for item in items:
            if isinstance(item, str):
                fold.skip(item)
            else:
                item["seq"] = fold.last_seq + 1
                fold.apply(item, fallback)
        done = lines[j][0] if j < count else committed
        i = j
    return done


def _item(line: bytes, fold: SummaryFold, shared: dict[bytes, Any], last: bool) -> str | Event | None:
    """One line as far as the fold needs it: its type alone when that is enough, else the event; ``None``
    when it does not parse. The last line is always parsed: its ``time`` is the session's last activity."""
    etype = _fast_type(line)
    if etype is not None and not last and not fold.reads(etype):
        return etype
    event = _shared_parse(line, shared) if etype == "request/header" else None
    if event is None:
        try:
            event = json.loads(line)
        except ValueError:
            return None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None
    return event


_TYPES: dict[bytes, str] = {}
"""Event types met at the start of lines, decoded once (the vocabulary is small; the cache is bounded)."""


def _fast_type(line: bytes) -> str | None:
    """The event type of a line written with ``type`` first (pydsh and the reference both do), else ``None``."""
    if not line.startswith(b'{"type":"'):
        return None
    raw = line[9 : line.find(b'"', 9)]
    known = _TYPES.get(raw)
    if known is not None:
        return known
    if not raw or b"\\" in raw or not raw.isascii():
        return None
    etype = raw.decode("ascii")
    if len(_TYPES) < SHARED_LIMIT * 4:
        _TYPES[raw] = etype
    return etype


def _shared_parse(line: bytes, shared: dict[bytes, Any]) -> Event | None:
    """A ``request/header`` line whose ``data`` (the same tool schemas again and again) is parsed once."""
    at = line.find(b',"data":')
    if at < 0 or not line.endswith(b"}"):
        return None
    tail = line[at + 8 : -1]
    try:
        event = json.loads(line[:at] + b"}")
        data = shared.get(tail)
        if data is None:
            if len(shared) >= SHARED_LIMIT:
                shared.clear()
            data = shared[tail] = json.loads(tail)
    except ValueError:
        return None
    if not isinstance(event, dict):
        return None
    event["data"] = data
    return event


# -- the table ------------------------------------------------------------------------------------


def _row(store: str, entry: IndexEntry) -> tuple[Any, ...]:
    """The ``sessions`` row of ``entry``."""
    header, fold = entry.header, entry.fold
    return (
        entry.path,
        store,
        entry.id,
        json.dumps(header, ensure_ascii=False, separators=(",", ":")),
        str(header.get("cwd") or ""),
        int(header.get("origin") != "subagent"),
        int(header.get("createdAt") or 0),
        entry.updated_at,
        fold.title_text() if fold is not None else None,
        *entry.key,
        entry.folded,
        entry.tail,
        json.dumps(fold.state(), ensure_ascii=False, separators=(",", ":")) if fold is not None else None,
        int(entry.pending),
    )


def _entry(row: tuple[Any, ...]) -> IndexEntry:
    """The entry of a row selected as ``COLUMNS``."""
    path, sid, header, ino, size, mtime_ns, folded, tail, fold, pending = row
    return IndexEntry(
        path,
        sid,
        json.loads(header),
        (ino, size, mtime_ns),
        folded,
        tail,
        SummaryFold.restore(json.loads(fold)) if fold is not None else None,
        bool(pending),
    )


def _put(conn: sqlite3.Connection, store: str, entries: Iterable[IndexEntry]) -> None:
    """Write the rows of ``entries`` in one transaction."""
    rows = [_row(store, e) for e in entries]
    if rows:
        with _transaction(conn):
            conn.executemany(INSERT, rows)


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Any:
    """One write transaction (the connection is in autocommit mode)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _select(conn: sqlite3.Connection, where: str, params: Iterable[Any], tail: str = "") -> list[IndexEntry]:
    """Entries of the rows matching ``where`` (built from constant fragments; values are always bound)."""
    sql = f"SELECT {COLUMNS} FROM sessions WHERE {where} {tail}"  # noqa: S608 - no value is formatted in
    return [_entry(r) for r in conn.execute(sql, tuple(params))]


class IndexDb:
    """The ``sessions`` table behind one lock, in a file shared with other processes or in memory.

    Every call runs in a worker thread; sqlite3 is imported on the first one, off the start path."""

    def __init__(self, path: Path | None, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op`` on the connection (blocking); a failing file (SQLite or the OS) is :class:`IndexUnavailable`.

        SQLite answers "database is locked" without waiting in a few WAL cases (another process switching
        the journal mode or recovering the WAL, a read mark it cannot take), so ``op`` is tried again until
        the busy timeout has passed; its transactions roll back when they fail, so a retry starts clean."""
        import sqlite3

        deadline = time.monotonic() + self.busy_timeout_s
        with self._lock:
            while True:
                try:
                    if self._conn is None:
                        self._conn = self._open()
                    return op(self._conn)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc) or time.monotonic() >= deadline:
                        raise IndexUnavailable(f"{self.path or 'the in-memory session index'}: {exc}") from exc
                    self._settle()
                    time.sleep(BUSY_RETRY_S)
                except (sqlite3.Error, OSError) as exc:
                    raise IndexUnavailable(f"{self.path or 'the in-memory session index'}: {exc}") from exc

    def _settle(self) -> None:
        """Leave a transaction a busy error interrupted, so the retry can begin its own."""
        if self._conn is not None and self._conn.in_transaction:
            with contextlib.suppress(Exception):
                self._conn.execute("ROLLBACK")

    def close(self) -> None:
        """Close the connection (the next call opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _open(self) -> sqlite3.Connection:
        """Connect and check the schema; a damaged file is removed and created again, with one warning."""
        import sqlite3

        if self.path is None:
            return _prepared(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
        try:
            return self._open_file()
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", None) not in DAMAGED_CODES:
                raise
            log.warning("session index %s is damaged (%s); rebuilding it from the session logs", self.path, exc)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")
            return self._open_file()

    def _open_file(self) -> sqlite3.Connection:
        """The file's connection: folder 0700, file 0600 (SQLite gives its journal files the same mode), WAL."""
        import sqlite3

        assert self.path is not None
        private_dir(self.path.parent)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            return _prepared(conn)
        except BaseException:
            conn.close()
            raise


def _prepared(conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn`` with the current schema: created when missing, dropped and made again when older."""
    import sqlite3

    conn.create_function("py_lower", 1, _lower, deterministic=True)
    if _version(conn) != SCHEMA_VERSION:
        with _transaction(conn):
            version = _version(conn)
            if version > SCHEMA_VERSION:
                raise sqlite3.OperationalError(f"it was written by a newer pydsh (index schema {version})")
            if version < SCHEMA_VERSION:
                conn.execute("DROP TABLE IF EXISTS sessions")
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return conn


def _busy(exc: Exception) -> bool:
    """Whether SQLite failed because another connection holds the file (SQLITE_BUSY or an extended form)."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == SQLITE_BUSY


def _version(conn: sqlite3.Connection) -> int:
    """The schema version the file was written with (0: a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _lower(value: Any) -> Any:
    """SQL ``py_lower``: Python's case folding, which SQLite's ``lower`` lacks beyond ASCII."""
    return value.lower() if isinstance(value, str) else value


# -- the service ----------------------------------------------------------------------------------


class SessionIndex:
    """The ``session_index`` service over one JSONL store."""

    def __init__(
        self,
        store: JsonlPersistence,
        path: Path | None,
        *,
        fallback: Fallback | None = None,
        busy_timeout_s: float = 2.0,
    ) -> None:
        self.store = store
        self.root = str(store.root)
        self.db = IndexDb(path, busy_timeout_s)
        self.fallback = fallback
        self._live: weakref.WeakKeyDictionary[JsonlHandle, SummaryFold] = weakref.WeakKeyDictionary()
        self._dirty: dict[str, IndexEntry] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._folding: dict[str, asyncio.Future[None]] = {}
        self._shared: dict[bytes, Any] = {}
        self._lock = asyncio.Lock()
        self._started = 0
        self._finished = 0
        self._serial = 0
        """Incremented when the index moves to memory: the new table is empty until a refresh fills it."""
        self._refreshed = -1
        """``_serial`` of the table the last complete refresh filled."""
        self._background: asyncio.Task[None] | None = None
        self._foreground = 0
        self._busy_until = 0.0
        """Loop time before which the background leaves the worker threads (and the GIL) to listings."""
        self._closed = False

    # -- queries ------------------------------------------------------------------------------

    async def page(
        self,
        limit: int,
        *,
        after: tuple[int, str] | None = None,
        cwd: str | None = None,
        title: str | None = None,
        untitled: str = "",
        exclude: frozenset[str] = frozenset(),
        refresh: bool = True,
    ) -> tuple[list[IndexEntry], bool]:
        """Root sessions newest first (last activity, then id) after the key ``after``, in ``cwd``, whose
        title (``untitled`` when there is none) contains ``title`` regardless of case; ``exclude`` ids are
        left out. Every entry returned is folded: the rows a page would show are folded and the page read
        again until it holds no pending row (a fold lowers a row's key, letting an unfolded one in; a page
        cut at an unfolded key would make the next page skip rows), folding at most ``PAGE_FOLD_BUDGET``
        or twice ``limit`` logs: past that (a copied home, whose mtimes all say "now"), the rows shown are
        folded in place and the order is approximate until the background has folded. Also whether more
        follow.
        ``refresh=False`` pages the rows as the last refresh left them (a caller paging again right after one)."""
        if title:
            await self.settled()
        elif refresh:
            await self.refresh()
        where = ["store = ?", "root = 1"]
        params: list[Any] = [self.root]
        if cwd is not None:
            where.append("cwd = ?")
            params.append(cwd)
        if title:
            where.append("instr(py_lower(coalesce(title, ?)), ?) > 0")
            params += [untitled, title.lower()]
        if after is not None:
            where.append("(updated_at < ? OR (updated_at = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        clause = " AND ".join(where)
        order = f"ORDER BY updated_at DESC, id LIMIT {limit + len(exclude) + 1}"

        async def select() -> list[IndexEntry]:
            return [r for r in await self._query(lambda c: _select(c, clause, params, order)) if r.id not in exclude]

        rows = await select()
        tried: set[str] = set()
        budget = max(2 * limit, PAGE_FOLD_BUDGET)
        while len(tried) < budget and (todo := [r for r in rows[:limit] if r.pending and r.path not in tried]):
            tried.update(r.path for r in todo)
            await self._fold(todo)
            rows = await select()
        page = rows[:limit]
        if any(r.pending for r in page):
            page = await self._settle_page(page)
        return page, len(rows) > limit

    async def _settle_page(self, page: list[IndexEntry]) -> list[IndexEntry]:
        """``page`` with every row folded, in the order the folds give. A pending row is ordered by its log's
        modification time, which its fold may lower (a home copied long after its sessions ran): the order
        is then approximate until the background has folded every log, but no row shows a summary its log
        does not have."""
        await self._fold([r for r in page if r.pending])
        paths = [r.path for r in page]
        where = f"store = ? AND path IN ({', '.join('?' * len(paths))})"
        folded = {r.path: r for r in await self._query(lambda c: _select(c, where, (self.root, *paths)))}
        return sorted((folded.get(r.path, r) for r in page), key=lambda r: (-r.updated_at, r.id))

    async def titles(self, ids: list[str]) -> dict[str, dict[str, Any] | None]:
        """Title snapshots (02 §11.1) of those of ``ids`` that are stored, for ``session_query``.

        Only the logs of those rows are checked (one ``stat`` each; the store is scanned only when an id has
        no row yet). A row folded before is brought up to date; a log never folded has its title read by
        :func:`title_fold` and is left to the background, so a first listing of titles reads each log once."""
        await self.flush()
        found: dict[str, dict[str, Any] | None] = {}
        for start in range(0, len(ids), SQL_VARIABLES):
            chunk = ids[start : start + SQL_VARIABLES]
            select = self._by_ids(chunk)
            rows = await self._query(select)
            if {r.id for r in rows} != set(chunk):
                await self.refresh()
                rows = await self._query(select)
            elif await self._recheck(rows):
                rows = await self._query(select)
            stale = [r for r in rows if r.pending and r.fold is not None]
            if stale:
                await self._fold(stale)
                rows = await self._query(select)
            self._busy()
            scanned = await asyncio.to_thread(self._title_folds, [r for r in rows if r.fold is None])
            self._busy()
            for row in rows:
                fold = row.fold or scanned.get(row.path)
                if fold is not None:
                    found[row.id] = fold.title_snapshot()
        return found

    def _title_folds(self, rows: list[IndexEntry]) -> dict[str, SummaryFold]:
        """:func:`title_fold` of each row's log (blocking); unreadable logs are left out."""
        out: dict[str, SummaryFold] = {}
        for row in rows:
            try:
                out[row.path] = title_fold(Path(row.path), self.fallback)
            except (OSError, SessionError) as exc:
                log.debug("session index: the titles of %s cannot be read: %s", row.path, exc)
        return out

    async def _recheck(self, rows: list[IndexEntry]) -> bool:
        """Mark the rows whose log changed pending and drop those whose log is gone (one ``stat`` each);
        whether any was."""

        def check() -> tuple[list[str], list[tuple[str, StatKey]]]:
            """Vanished and changed logs among ``rows`` (blocking)."""
            gone: list[str] = []
            changed: list[tuple[str, StatKey]] = []
            for row in rows:
                try:
                    key = stat_key(os.stat(row.path))
                except OSError:
                    gone.append(row.path)
                    continue
                if key != row.key:
                    changed.append((row.path, key))
            return gone, changed

        gone, changed = await asyncio.to_thread(check)
        if gone or changed:
            await self._resilient(lambda: self._run(lambda c: self._write_changes(c, gone, changed, [])))
        return bool(gone or changed)

    async def known(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that have a row, as the index stands (nothing is scanned or checked)."""
        if not ids:
            return set()
        await self.flush()
        where = f"store = ? AND id IN ({', '.join('?' * len(ids))})"
        sql = f"SELECT id FROM sessions WHERE {where}"  # noqa: S608 - no value is formatted in
        return await self._query(lambda c: {sid for (sid,) in c.execute(sql, (self.root, *ids))})

    def _by_ids(self, ids: list[str]) -> Callable[[sqlite3.Connection], list[IndexEntry]]:
        """A select of the rows of ``ids`` in this store."""
        where = f"store = ? AND id IN ({', '.join('?' * len(ids))})"
        return lambda conn: _select(conn, where, (self.root, *ids))

    async def stored(self) -> list[dict[str, Any]]:
        """``[{header, revision}]`` of every stored session, as ``persistence.list`` gives it (no log is read)."""
        await self.refresh()

        def select(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            """Headers and sizes only: no fold is decoded."""
            rows = conn.execute("SELECT header, size FROM sessions WHERE store = ?", (self.root,))
            return [{"header": json.loads(header), "revision": size} for header, size in rows]

        return await self._query(select)

    async def workspaces(self, *, refresh: bool = True) -> dict[str, int]:
        """Root sessions per working directory (``""``: none), the folder with the newest session first;
        ``refresh=False`` counts the rows as the last refresh left them (a caller that just listed)."""
        if refresh:
            await self.refresh()
        sql = (
            "SELECT cwd, count(*) FROM sessions WHERE store = ? AND root = 1 GROUP BY cwd ORDER BY max(updated_at) DESC"
        )
        return await self._query(lambda c: dict(c.execute(sql, (self.root,)).fetchall()))

    async def settled(self) -> None:
        """Return once every stored log is folded (tests, benches and title searches wait for this)."""
        await self.refresh()
        pending = self._pending()
        while stale := await self._query(pending):
            await self._fold(stale)

    # -- keeping up with the store ------------------------------------------------------------------

    async def refresh(self) -> None:
        """Bring the rows in line with the store: one scan that started after this call (concurrent
        callers share it); rows of new or changed logs become pending and the background folds them."""
        ticket = self._started
        async with self._lock:
            if self._finished > ticket and self._refreshed == self._serial:
                return
            self._started += 1
            number, serial = self._started, self._serial
            try:
                await self._reconcile()
            except IndexUnavailable:
                serial = self._serial
                await self._reconcile()
            self._finished = number
            if self._serial == serial:
                self._refreshed = serial
        self._busy()
        self._fold_in_background()

    async def _reconcile(self) -> None:
        """Scan the store and write what changed: new rows (header only), pending marks, removals."""
        await self.flush()
        found = {str(path): st for path, st in await asyncio.to_thread(self.store.scan_logs)}
        sql = "SELECT path, ino, size, mtime_ns FROM sessions WHERE store = ?"
        known = await self._run(lambda c: {p: (i, s, m) for p, i, s, m in c.execute(sql, (self.root,))})
        gone = [path for path in known if path not in found]
        changed = [(path, stat_key(st)) for path, st in found.items() if path in known and known[path] != stat_key(st)]
        new = await asyncio.to_thread(_header_entries, [(p, st) for p, st in found.items() if p not in known])
        if gone or changed or new:
            await self._run(lambda c: self._write_changes(c, gone, changed, new))

    def _write_changes(
        self,
        conn: sqlite3.Connection,
        gone: list[str],
        changed: list[tuple[str, StatKey]],
        new: list[IndexEntry],
    ) -> None:
        """Drop the rows of vanished logs, mark changed ones pending and add new ones, in one transaction."""
        with _transaction(conn):
            conn.executemany("DELETE FROM sessions WHERE path = ?", [(p,) for p in gone])
            conn.executemany(
                "UPDATE sessions SET ino = ?, size = ?, mtime_ns = ?, pending = 1, "
                "updated_at = max(updated_at, ? / 1000000 + ?) WHERE path = ?",
                [(*key, key[2], MTIME_SLACK_MS, path) for path, key in changed],
            )
            conn.executemany(INSERT, [_row(self.root, e) for e in new])

    def _pending(self) -> Callable[[sqlite3.Connection], list[IndexEntry]]:
        """A select of the next pending rows, newest first."""
        tail = f"ORDER BY updated_at DESC LIMIT {FOLD_BATCH}"
        return lambda conn: _select(conn, "store = ? AND pending = 1", (self.root,), tail)

    def _fold_in_background(self) -> None:
        """Fold pending rows newest first in a background task (one at a time)."""
        if self._closed or (self._background is not None and not self._background.done()):
            return
        self._background = asyncio.get_running_loop().create_task(self._fold_pending())

    async def _fold_pending(self) -> None:
        """The background task: fold pending rows a batch at a time whenever no caller waits for a fold."""
        try:
            pending = self._pending()
            while await self._idle() and (stale := await self._query(pending)):
                await self._fold(stale, foreground=False)
        except Exception:
            log.warning("folding session logs into the session index failed", exc_info=True)

    async def _idle(self) -> bool:
        """Wait until no caller has folded or refreshed for ``BACKGROUND_DELAY_S``; always true."""
        loop = asyncio.get_running_loop()
        while self._foreground or loop.time() < self._busy_until:
            await asyncio.sleep(max(self._busy_until - loop.time(), BACKGROUND_DELAY_S / 3))
        return True

    def _busy(self) -> None:
        """A caller is being answered: hold the background off for a while."""
        self._busy_until = asyncio.get_running_loop().time() + BACKGROUND_DELAY_S

    async def _fold(self, entries: list[IndexEntry], *, foreground: bool = True) -> None:
        """Refold ``entries`` from their logs (a log already being folded is waited for, not folded twice);
        while a ``foreground`` fold runs, and for a moment after, the background waits."""
        if foreground:
            self._foreground += 1
        try:
            await self._fold_now(entries)
        finally:
            if foreground:
                self._foreground -= 1
                self._busy()

    async def _fold_now(self, entries: list[IndexEntry]) -> None:
        """Fold and write ``entries``, each log once however many callers ask for it at the same time."""
        waits = [self._folding[e.path] for e in entries if e.path in self._folding]
        todo = [e for e in entries if e.path not in self._folding]
        if todo:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            for entry in todo:
                self._folding[entry.path] = done
            try:
                folded, lost = await asyncio.to_thread(self._fold_sync, todo)
                with contextlib.suppress(IndexUnavailable):
                    await self._run(lambda c: self._write_folds(c, folded, lost))
            finally:
                for entry in todo:
                    self._folding.pop(entry.path, None)
                done.set_result(None)
        for wait in waits:
            await wait

    def _fold_sync(self, entries: list[IndexEntry]) -> tuple[list[IndexEntry], list[str]]:
        """Fold each log (blocking); logs that are gone or unreadable are dropped (a later scan finds them again)."""
        folded: list[IndexEntry] = []
        lost: list[str] = []
        for entry in entries:
            try:
                folded.append(fold_log(Path(entry.path), entry, self.fallback, self._shared))
            except (OSError, SessionError) as exc:
                log.debug("session index: %s cannot be folded: %s", entry.path, exc)
                lost.append(entry.path)
        return folded, lost

    def _write_folds(self, conn: sqlite3.Connection, folded: list[IndexEntry], lost: list[str]) -> None:
        """Store refolded rows and drop those whose log could not be read, in one transaction."""
        with _transaction(conn):
            conn.executemany("DELETE FROM sessions WHERE path = ?", [(p,) for p in lost])
            conn.executemany(INSERT, [_row(self.root, e) for e in folded])

    # -- this process's writes ------------------------------------------------------------------------

    def written(self, handle: JsonlHandle, batch: list[Event]) -> None:
        """Advance the fold of a log this process writes by a batch that reached the disk (on the loop);
        the row is written to the file later, in one transaction with the others."""
        if self._closed or handle.stat_key is None or handle.store is not self.store:
            return
        fold = self._live.get(handle)
        events = batch
        if fold is None:
            fold = self._live[handle] = SummaryFold()
            events = handle.durable
        for event in events:
            fold.apply(event, self.fallback)
        path = str(handle.path)
        key = handle.stat_key
        snapshot = SummaryFold.restore(fold.state())
        self._dirty[path] = IndexEntry(path, handle.id, handle.header, key, key[1], None, snapshot, False)
        if self._flush_timer is None:
            self._flush_timer = asyncio.get_running_loop().call_later(FLUSH_DELAY_S, self._flush_later)

    def _flush_later(self) -> None:
        """The debounce timer's end: write the rows of recent writes in a task of its own."""
        self._flush_timer = None
        task = asyncio.get_running_loop().create_task(self.flush())
        task.add_done_callback(_log_failure)

    async def flush(self) -> None:
        """Write the rows of this process's recent writes to the index file."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        dirty, self._dirty = list(self._dirty.values()), {}
        if dirty:
            await self._resilient(lambda: self._run(lambda c: _put(c, self.root, dirty)))

    async def close(self) -> None:
        """Write what is pending, stop folding and close the file (the service's teardown)."""
        try:
            await self.flush()
        finally:
            self._closed = True
            if self._background is not None:
                self._background.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._background
            await asyncio.to_thread(self.db.close)

    # -- the database -----------------------------------------------------------------------------------

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op`` in a worker thread. When the index file fails, the index moves to memory for the rest of
        the process (one warning) before :class:`IndexUnavailable` is raised; the caller starts over."""
        db = self.db
        try:
            return await asyncio.to_thread(db.run, op)
        except IndexUnavailable as exc:
            if db is self.db and db.path is not None:
                log.warning("session index %s; this process keeps its session index in memory instead", exc)
                self.db = IndexDb(None, db.busy_timeout_s)
                self._serial += 1
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(db.close)
            raise

    async def _query(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op`` on a table some refresh has filled; if the file fails under it, on the rebuilt in-memory one."""
        try:
            if self._refreshed == self._serial:
                return await self._run(op)
        except IndexUnavailable:
            pass
        await self.refresh()
        return await self._run(op)

    async def _resilient(self, action: Callable[[], Awaitable[T]]) -> T:
        """``action``, once more (on the in-memory index) if the file failed under it."""
        try:
            return await action()
        except IndexUnavailable:
            return await action()


def _header_entries(found: list[tuple[str, os.stat_result]]) -> list[IndexEntry]:
    """Header-only, pending entries of new logs (blocking); a log whose header cannot be read is left out."""
    out: list[IndexEntry] = []
    for path, st in found:
        try:
            header, _size = read_head(Path(path))
        except (OSError, SessionError):
            continue
        out.append(IndexEntry(path, header["id"], header, stat_key(st), 0, None, None, True))
    return out


def _log_failure(task: asyncio.Task[None]) -> None:
    """One warning for a debounced write that failed (the next listing writes the rows again)."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("writing the session index failed", exc_info=task.exception())


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str | None = None
    """The index file (``null``: keep the index in memory, rebuilt by every process)."""
    busyTimeoutMs: int = Field(default=2000, ge=0)
    """How long to wait for another process's write before going on without the file."""


name = "session-index"
inject = (SESSION_PERSISTENCE,)
optional = (SESSION_TITLE,)


def apply(ctx: Context, config: Config) -> None:
    """Provide ``session_index`` over a JSONL store and follow the batches it writes."""
    store = ctx.require(SESSION_PERSISTENCE)
    if not isinstance(store, JsonlPersistence):
        log.warning("session-index: the session store is not the JSONL backend; listings read every log")
        return
    titles = ctx.get(SESSION_TITLE)
    path = Path(config.path).expanduser() if config.path else None
    index = SessionIndex(
        store,
        path,
        fallback=titles.fallback_for if titles is not None else None,
        busy_timeout_s=config.busyTimeoutMs / 1000,
    )
    ctx.provide(SESSION_INDEX, index)
    store.observers.append(index.written)
    ctx.register(lambda: store.observers.remove(index.written))
    ctx.register(index.close)
