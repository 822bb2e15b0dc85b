"""The session index (``session-index``): rows that follow the logs and never stand in for them."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.compose import Row
from pydsh.session import index as index_module
from pydsh.session.events import Event, make_header
from pydsh.session.index import IndexEntry, SessionIndex, fold_log, title_fold
from pydsh.session.keys import SESSION_INDEX, SESSION_PERSISTENCE, SESSION_QUERY, SESSIONS
from pydsh.session.log import Session, SessionStore
from pydsh.session.persistence.jsonl import JsonlPersistence
from pydsh.session.summary import SummaryFold
from pydsh.session.title import TITLE, TitleService
from pydsh.session.title import Config as TitleConfig

ROOT_DIR = Path(__file__).resolve().parents[2]
USAGE = {"inputTokens": 100, "cacheReadTokens": 50, "cacheWriteTokens": 0, "outputTokens": 10}
FALLBACK = TitleService(TitleConfig()).fallback_for


def prompt(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": text}


def turn(session: Session, text: str) -> None:
    """One turn of one step: the prompt, an answer with a usage, and the brackets around them."""
    n = sum(e["type"] == "turn/start" for e in session.events) + 1
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": f"a{n}-{session.seq}",
    }
    session.append("turn/start", {"turn": n})
    session.append("user/message", prompt(text), surface_op="append")
    session.append("step/start", {"turn": n, "step": 1})
    session.append(
        "assistant/message",
        {"turn": n, "step": 1, "message": answer, "usage": USAGE, "stream": []},
        surface_op="append",
    )
    session.append("step/end", {"turn": n, "step": 1})
    session.append("turn/end", {"turn": n, "reason": {"kind": "completed"}})


async def elsewhere(root: Path, sid: str, texts: list[str], *, compression: str = "none", **header: Any) -> Path:
    """A log written by a store this process's index does not follow (another process, the reference)."""
    store = JsonlPersistence(root, compression=compression)
    session = SessionStore(Kernel().ctx).new(make_header(sid, 1_000, cwd="/w", **header))
    handle = await store.create(session.header)
    session.publish = lambda s, e: handle.append([e])
    session.append("permission/preset", {"preset": "read-only"})
    for text in texts:
        turn(session, text)
    await handle.close()
    assert handle.path is not None
    return handle.path


async def append_elsewhere(
    root: Path, sid: str, texts: list[str], title: str | None = None, kind: str = "user"
) -> None:
    """More turns (and a title, a user's unless ``kind`` says otherwise) appended to a stored log, as
    another process would."""
    handle = await JsonlPersistence(root).open(sid, "write")
    session = SessionStore(Kernel().ctx).new(handle.header, await handle.read())
    session.publish = lambda s, e: handle.append([e])
    for text in texts:
        turn(session, text)
    if title is not None:
        session.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": kind}})
    await handle.close()


def reference_fold(path: Path) -> SummaryFold:
    """The fold over every event of a plain log, read the plain way."""
    fold = SummaryFold()
    for line in path.read_bytes().splitlines()[1:]:
        fold.apply(json.loads(line), FALLBACK)
    return fold


async def load(tmp_path: Path, **index_config: Any) -> Kernel:
    kernel = Kernel()
    config = {"path": str(tmp_path / "index" / "sessions.sqlite3"), **index_config}
    await kernel.load(
        [
            Row(id="session", name="session"),
            Row(id="persistence", name="session-persistence-jsonl", config={"root": str(tmp_path / "sessions")}),
            Row(id="title", name="session-title"),
            Row(id="query", name="session-query"),
            Row(id="index", name="session-index", config=config),
        ]
    )
    return kernel


def index_of(kernel: Kernel) -> SessionIndex:
    index: SessionIndex = kernel.ctx.require(SESSION_INDEX)
    return index


async def listed(kernel: Kernel) -> dict[str, tuple[str | None, int, int]]:
    """``{id: (title, turns, tokens)}`` of every root session the index pages out."""
    entries, _more = await index_of(kernel).page(1000)
    return {e.id: (e.fold.title_text(), e.fold.turns, e.fold.tokens) for e in entries if e.fold is not None}


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_a_log_folds_the_same_from_the_start_and_from_where_it_stopped(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "sessions"
    path = await elsewhere(root, "s", ["first task here", "second task"], compression=compression)
    empty = index_module.IndexEntry(str(path), "s", {}, (0, 0, 0), 0, None, None, True)
    half = fold_log(path, empty, FALLBACK, {})
    await append_elsewhere(root, "s", ["third task"], title="Renamed")
    whole = fold_log(path, empty, FALLBACK, {})
    resumed = fold_log(path, half, FALLBACK, {})
    assert resumed.fold == whole.fold and resumed.folded == whole.folded == path.stat().st_size
    assert (whole.fold.turns, whole.fold.steps, whole.fold.tokens) == (3, 3, 480)
    assert whole.fold.title_text() == "Renamed" and whole.fold.permission_preset == "read-only"
    if compression == "none":
        assert whole.fold == reference_fold(path)


async def test_a_log_cut_and_written_again_is_folded_from_the_start(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    path = await elsewhere(root, "s", ["one", "two", "three"])
    empty = index_module.IndexEntry(str(path), "s", {}, (0, 0, 0), 0, None, None, True)
    before = fold_log(path, empty, FALLBACK, {})
    lines = path.read_bytes().splitlines(keepends=True)
    with path.open("r+b") as fh:  # same file, same inode: cut after the first turn, then a longer one
        fh.truncate(sum(map(len, lines[:8])))
    await append_elsewhere(root, "s", ["replacement turn with more words", "and another", "and a third"])
    assert path.stat().st_size > before.folded
    again = fold_log(path, before, FALLBACK, {})
    assert again.fold == reference_fold(path) and again.fold.turns == 4


async def test_a_torn_last_line_is_folded_once_it_is_complete(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    path = await elsewhere(root, "s", ["one"])
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last + 5])
    empty = index_module.IndexEntry(str(path), "s", {}, (0, 0, 0), 0, None, None, True)
    torn = fold_log(path, empty, FALLBACK, {})
    assert torn.folded == last and torn.fold is not None and torn.fold.last_seq == 5
    path.write_bytes(data)
    assert fold_log(path, torn, FALLBACK, {}).fold == reference_fold(path)


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_titles_read_alone_are_the_titles_of_the_fold(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "sessions"
    logs = {
        "fallback": await elsewhere(root, "fallback", ["Summarise the quarterly numbers for me please", "more"]),
        "none": await elsewhere(root, "none", [], compression=compression),
    }
    await elsewhere(root, "renamed", ["first words of it"], compression=compression)
    await append_elsewhere(root, "renamed", ["second"], title="A user title")
    await append_elsewhere(root, "renamed", ["third"], title="a later fallback", kind="fallback")
    logs["renamed"] = next(root.rglob("renamed/session.v4.jsonl*"))
    for sid, path in logs.items():
        empty = index_module.IndexEntry(str(path), sid, {}, (0, 0, 0), 0, None, None, True)
        folded = fold_log(path, empty, FALLBACK, {}).fold
        assert folded is not None
        assert title_fold(path, FALLBACK).title_snapshot() == folded.title_snapshot(), sid
    assert title_fold(logs["renamed"], FALLBACK).title_text() == "A user title"
    assert title_fold(logs["none"], FALLBACK).title_snapshot() is None


async def test_a_first_listing_of_titles_folds_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sessions"
    for n in range(3):
        await elsewhere(root, f"s{n}", [f"task {n} here", "and more"], compression="zstd" if n else "none")

    def no_fold(*args: object) -> None:
        raise AssertionError("a log was folded")

    monkeypatch.setattr(index_module, "fold_log", no_fold)
    monkeypatch.setattr(SessionIndex, "_fold_in_background", lambda self: None)
    kernel = await load(tmp_path)
    snapshots = await kernel.ctx.require(SESSION_QUERY).read_title_snapshots(["s0", "s1", "s2"])
    assert [s["title"]["title"] for s in snapshots] == ["task 0 here", "task 1 here", "task 2 here"]
    await kernel.dispose()


async def test_rows_of_this_process_s_writes_need_no_log_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = await load(tmp_path)
    sessions = kernel.ctx.require(SESSIONS)
    persistence = kernel.ctx.require(SESSION_PERSISTENCE)
    for sid in ("a", "b"):
        session = sessions.new(make_header(sid, 1, cwd="/w"))
        handle = await persistence.create(session.header)
        persistence.bind(session, handle)
        turn(session, f"task of {sid} here")
        await handle.close()
    await kernel.dispose()

    def no_read(*args: object) -> None:
        raise AssertionError("a log was read")

    monkeypatch.setattr(index_module, "fold_log", no_read)
    monkeypatch.setattr(index_module, "read_head", no_read)
    kernel = await load(tmp_path)
    assert await listed(kernel) == {"b": ("task of b here", 1, 160), "a": ("task of a here", 1, 160)}
    query = kernel.ctx.require(SESSION_QUERY)
    assert [r["header"]["id"] for r in await query.list_sessions()] == ["a", "b"]
    snapshots = await query.read_title_snapshots(["a", "b"])
    assert [s["title"]["title"] for s in snapshots] == ["task of a here", "task of b here"]
    await kernel.dispose()


async def test_logs_written_without_the_index_are_found_and_refolded(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    await elsewhere(root, "old", ["an old task"])
    kernel = await load(tmp_path)
    assert await listed(kernel) == {"old": ("an old task", 1, 160)}
    await elsewhere(root, "new", ["a new task"])
    await append_elsewhere(root, "old", ["more work"], title="Old, renamed")
    await elsewhere(root, "member", ["delegated"], origin="subagent", parent_session="old", delegation_depth=1)
    assert await listed(kernel) == {"old": ("Old, renamed", 2, 320), "new": ("a new task", 1, 160)}
    query = kernel.ctx.require(SESSION_QUERY)
    assert (await query.read_title("old"))["source"] == {"kind": "user"}
    assert {r["header"]["id"] for r in await query.list_sessions()} == {"old", "new", "member"}
    (root / "--w--" / "new" / "session.v4.jsonl").unlink()
    assert set(await listed(kernel)) == {"old"}
    await kernel.dispose()


async def test_a_page_shows_folded_rows_even_when_mtimes_mislead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    paths = [await elsewhere(root, f"s{n}", [f"task {n}"]) for n in range(6)]
    for n, path in enumerate(paths):  # a copied home: every log touched long after its last event
        os.utime(path, ns=(0, 4_000_000_000_000_000_000 - n))
    monkeypatch.setattr(SessionIndex, "_fold_in_background", lambda self: None)  # the page alone must do it
    kernel = await load(tmp_path)
    entries, more = await index_of(kernel).page(1)
    assert more and [(e.pending, e.fold is not None) for e in entries] == [(False, True)]
    assert entries[0].fold is not None and entries[0].fold.title_text() == f"task {entries[0].id[1]}"
    await kernel.dispose()


async def test_pages_skip_no_row_when_mtimes_trail_the_last_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sessions"
    paths = [await elsewhere(root, f"s{n}", [f"task {n}"]) for n in range(7)]
    first = min(reference_fold(path).updated_at for path in paths)
    for path in paths:  # file times from a coarse clock, trailing the last events written within one tick
        os.utime(path, ns=((first - 5) * 1_000_000, (first - 5) * 1_000_000))
    monkeypatch.setattr(SessionIndex, "_fold_in_background", lambda self: None)
    kernel = await load(tmp_path)
    index = index_of(kernel)
    seen: list[IndexEntry] = []
    after: tuple[int, str] | None = None
    while True:
        entries, more = await index.page(2, after=after)
        seen += entries
        if not more:
            break
        after = (entries[-1].updated_at, entries[-1].id)
    assert [e.id for e in seen] == [e.id for e in sorted(seen, key=lambda e: (-e.updated_at, e.id))]
    assert sorted(e.id for e in seen) == [f"s{n}" for n in range(7)]
    await kernel.dispose()


async def test_titles_are_those_the_logs_give(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    await elsewhere(root, "plain", ["Summarise the quarterly numbers for me please"])
    await elsewhere(root, "zstd", ["compressed prompt"], compression="zstd")
    await append_elsewhere(root, "zstd", ["then this"], title="Pinned")
    kernel = await load(tmp_path)
    query = kernel.ctx.require(SESSION_QUERY)
    indexed = await query.read_title_snapshots(["plain", "zstd", "missing"])
    for snapshot in indexed[:2]:
        session = await query.read(snapshot["id"])
        logged = session.fold(TITLE)
        found = FALLBACK(session.events)
        assert found is not None
        fallback = {
            "title": found[0],
            "messageSeqs": [found[1]],
            "source": {"kind": "fallback"},
            "eventSeq": None,
            "updatedAt": session.events[found[1]]["time"],
        }
        assert snapshot["ok"] and snapshot["title"] == (logged if logged is not None else fallback)
    assert indexed[0]["title"]["title"] == "Summarise the quarterly numbers for"
    assert indexed[1]["title"]["title"] == "Pinned" and not indexed[2]["ok"]
    await kernel.dispose()


async def test_the_index_files_are_private(tmp_path: Path) -> None:
    await elsewhere(tmp_path / "sessions", "s", ["task"])
    kernel = await load(tmp_path)
    await listed(kernel)
    folder = tmp_path / "index"
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    await kernel.dispose()
    assert modes == {"sessions.sqlite3": 0o600, "sessions.sqlite3-wal": 0o600, "sessions.sqlite3-shm": 0o600}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


async def test_a_damaged_index_file_is_rebuilt_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await elsewhere(tmp_path / "sessions", "s", ["task"])
    db = tmp_path / "index" / "sessions.sqlite3"
    db.parent.mkdir(mode=0o700)
    db.write_bytes(b"this is not a database, it is garbage left by something else" * 100)
    kernel = await load(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pydsh.session.index"):
        assert await listed(kernel) == {"s": ("task", 1, 160)}
        assert await listed(kernel) == {"s": ("task", 1, 160)}
    await kernel.dispose()
    assert [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()] == [
        f"session index {db} is damaged (file is not a database); rebuilding it from the session logs"
    ]
    assert len(caplog.records) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT id, title FROM sessions").fetchall() == [("s", "task")]


async def test_a_locked_index_file_is_gone_around_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "sessions"
    await elsewhere(root, "s", ["task"])
    kernel = await load(tmp_path)
    await listed(kernel)
    await kernel.dispose()
    await elsewhere(root, "t", ["written while locked"])
    db = tmp_path / "index" / "sessions.sqlite3"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        kernel = await load(tmp_path, busyTimeoutMs=50)
        with caplog.at_level(logging.WARNING, logger="pydsh.session.index"):
            assert await listed(kernel) == {"t": ("written while locked", 1, 160), "s": ("task", 1, 160)}
            assert await listed(kernel) == {"t": ("written while locked", 1, 160), "s": ("task", 1, 160)}
        await kernel.dispose()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"session index {db}: database is locked; this process keeps its session index in memory instead"
    ]


def test_a_busy_answer_sqlite_gives_without_waiting_is_tried_again(tmp_path: Path) -> None:
    """SQLite answers "database is locked" at once in some WAL cases; the index tries again within its busy
    timeout (rolling back what the failed try began) instead of leaving the file."""
    db = index_module.IndexDb(tmp_path / "sessions.sqlite3", busy_timeout_s=5)
    tries = []

    def op(conn: sqlite3.Connection) -> int:
        tries.append(conn.in_transaction)
        if len(tries) < 3:
            conn.execute("BEGIN IMMEDIATE")
            error = sqlite3.OperationalError("database is locked")
            error.sqlite_errorcode = 5 | (2 << 8)  # type: ignore[attr-defined]  # SQLITE_BUSY_SNAPSHOT
            raise error
        return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])

    assert db.run(op) == 0
    assert tries == [False, False, False]
    db.close()
    quick = index_module.IndexDb(tmp_path / "sessions.sqlite3", busy_timeout_s=0)

    def always_busy(conn: sqlite3.Connection) -> None:
        error = sqlite3.OperationalError("database is locked")
        error.sqlite_errorcode = 5  # type: ignore[attr-defined]
        raise error

    with pytest.raises(index_module.IndexUnavailable, match="database is locked"):
        quick.run(always_busy)
    quick.close()


async def test_an_index_that_cannot_be_created_is_kept_in_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await elsewhere(tmp_path / "sessions", "s", ["task"])
    (tmp_path / "index").write_text("a file where the index folder should be")
    kernel = await load(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pydsh.session.index"):
        assert await listed(kernel) == {"s": ("task", 1, 160)}
        assert await listed(kernel) == {"s": ("task", 1, 160)}
    await kernel.dispose()
    assert len(caplog.records) == 1 and "keeps its session index in memory" in caplog.records[0].getMessage()


async def test_an_index_from_a_newer_pydsh_is_left_alone(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    await elsewhere(tmp_path / "sessions", "s", ["task"])
    db = tmp_path / "index" / "sessions.sqlite3"
    db.parent.mkdir(mode=0o700)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version=99")
    kernel = await load(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pydsh.session.index"):
        assert await listed(kernel) == {"s": ("task", 1, 160)}
    await kernel.dispose()
    assert "written by a newer pydsh" in caplog.records[0].getMessage() and len(caplog.records) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (99,)


async def test_two_processes_listing_at_once_share_one_index(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    expected = {}
    for n in range(40):
        await elsewhere(root, f"s{n:02d}", [f"task number {n}", "follow up"])
        expected[f"s{n:02d}"] = [f"task number {n}", 2]
    db = tmp_path / "index" / "sessions.sqlite3"
    command = [sys.executable, "-m", "tests.session.index_proc", str(root), str(db)]
    children = [
        await asyncio.create_subprocess_exec(*command, cwd=ROOT_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = [await child.communicate() for child in children]
    assert [child.returncode for child in children] == [0, 0], [err.decode() for _out, err in outputs]
    assert [json.loads(out) for out, _err in outputs] == [expected, expected]
    assert [err for _out, err in outputs] == [b"", b""]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*), sum(pending) FROM sessions").fetchone() == (40, 0)


def test_events_are_counted_alike_by_type_alone_and_whole() -> None:
    whole, typed = SummaryFold(), SummaryFold()
    events: list[Event] = [
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 6, "data": {"turn": 1, "step": 1}},
        {"type": "tool/call", "seq": 2, "time": 7, "data": {}},
    ]
    for event in events:
        whole.apply(event)
        typed.skip(event["type"])
    assert (typed.turns, typed.steps, typed.last_seq) == (whole.turns, whole.steps, whole.last_seq) == (1, 1, 2)


def test_malformed_data_is_skipped_not_raised() -> None:
    fold = SummaryFold()
    for seq, (etype, data) in enumerate(
        [
            ("request/header", {"header": "not an object"}),
            ("session/title", {"title": 3}),
            ("assistant/message", {"usage": {"inputTokens": "many", "outputTokens": 2}}),
            ("permission/preset", {"preset": None}),
            ("model/selection", []),
        ]
    ):
        fold.apply({"type": etype, "seq": seq, "time": seq, "data": data})
    assert (fold.title, fold.tokens, fold.model, fold.permission_preset) == (None, 2, {}, None)
