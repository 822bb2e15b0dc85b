"""Titles (spec 02 §11.2) and session query (§11.1)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.compose import Row
from pydsh.session.errors import SessionPersistenceNotFoundError, SessionTitleInvalidError
from pydsh.session.events import make_header
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_QUERY, SESSION_TITLE, SESSIONS
from pydsh.session.title import TITLE, Config, TitleService, clean, fallback_title


def prompt(text: str, kind: str = "user") -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind},
        "role": "user",
        "id": text[:8] or "x",
    }


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("\x1b[31mred\x1b[0m text", "red text"),
        ("\x1b]0;window title\x07hello", "hello"),
        ("a\u200bb\u202ec\ufeff", "abc"),
        ("tab\tand\n\nnewlines   too", "tab and newlines too"),
        ("\x00\x07bell\x7f", "bell"),
    ],
)
def test_clean(raw: str, cleaned: str) -> None:
    assert clean(raw) == cleaned


def test_fallback_words_and_bytes() -> None:
    assert fallback_title("Use the read tool exactly once per file", 5, 40) == "Use the read tool exactly"
    title = fallback_title("ééééééééééééééééééééééééééééé", 5, 40)
    assert len(title.encode()) <= 40 and title == "é" * 20


async def host(tmp_path: Path) -> Kernel:
    kernel = Kernel()
    await kernel.load(
        [
            Row(id="session", name="session"),
            Row(id="persistence", name="session-persistence-jsonl", config={"root": str(tmp_path)}),
            Row(id="title", name="session-title"),
            Row(id="query", name="session-query"),
        ]
    )
    return kernel


async def test_fallback_title_lands_after_commit_and_user_title_pins(tmp_path: Path) -> None:
    kernel = await host(tmp_path)
    sessions = kernel.ctx.require(SESSIONS)
    titles = kernel.ctx.require(SESSION_TITLE)
    session = sessions.new(make_header("s1", 1))
    session.append("user/message", prompt("note", kind="runtime-context"), surface_op="append")
    session.append("user/message", prompt("Summarise the quarterly numbers for me please"), surface_op="append")
    assert session.fold(TITLE) is None
    await asyncio.sleep(0)
    state = session.fold(TITLE)
    assert state["title"] == "Summarise the quarterly numbers for"
    assert state["messageSeqs"] == [1]
    assert state["source"] == {"kind": "fallback"}
    titles.rename(session, "  \x1b[1mMy title\x1b[0m  ")
    session.append("session/title", {"title": "later", "messageSeqs": [], "source": {"kind": "fallback"}})
    assert session.fold(TITLE)["title"] == "My title"
    with pytest.raises(SessionTitleInvalidError):
        titles.rename(session, " \x1b[0m ")
    await kernel.dispose()


async def test_query_lists_newest_first_and_reads_repaired_logs(tmp_path: Path) -> None:
    kernel = await host(tmp_path)
    sessions = kernel.ctx.require(SESSIONS)
    persistence = kernel.ctx.require(SESSION_PERSISTENCE)
    query = kernel.ctx.require(SESSION_QUERY)
    for sid, created in (("old", 1), ("new", 5)):
        session = sessions.new(make_header(sid, created, cwd="/w"))
        handle = await persistence.create(session.header)
        persistence.bind(session, handle)
        session.append("turn/start", {"turn": 1})
        session.append("user/message", prompt(f"{sid} task words here"), surface_op="append")
        await handle.close()
    listed = await query.list_sessions()
    assert [r["header"]["id"] for r in listed] == ["new", "old"]
    assert all(r["live"] is False and r["persisted"]["revision"] > 0 for r in listed)
    read = await query.read_session("old")
    assert [e["type"] for e in read["events"]][-1] == "turn/end"
    assert read["events"][-1]["data"]["reason"] == {"kind": "interrupted"}
    assert sessions.get("old") is None
    title = await query.read_title("old")
    assert title["title"] == "old task words here"
    assert title["source"] == {"kind": "fallback"}
    surface = await query.read_surface("old")
    assert [e["type"] for e in surface["events"]] == ["user/message"]
    snapshots = await query.read_title_snapshots(["old", "missing"])
    assert snapshots[0]["ok"] and not snapshots[1]["ok"]
    with pytest.raises(SessionPersistenceNotFoundError):
        await query.read_session("missing")
    stored = await query.read("old")
    assert [e["type"] for e in stored.events] == [e["type"] for e in read["events"]]
    assert stored.header == read["session"] and sessions.get("old") is None
    with pytest.raises(SessionPersistenceNotFoundError):
        await query.read("missing")
    await kernel.dispose()


def test_title_config_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError):
        Config.model_validate({"fallbackMaxWords": 5, "typo": 1})
    assert TitleService(Config()).fallback_for([]) is None


async def test_list_and_read_events(tmp_path: Path) -> None:
    kernel = await host(tmp_path)
    sessions = kernel.ctx.require(SESSIONS)
    query = kernel.ctx.require(SESSION_QUERY)
    session = sessions.new(make_header("ev", 1))
    await sessions.enter(session)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", prompt("hello there"), surface_op="append")
    assert [e["seq"] for e in await query.list_events("ev", 1)] == [1]
    assert (await query.read_event("ev", 0))["type"] == "turn/start"
    with pytest.raises(IndexError):
        await query.read_event("ev", 9)
    await kernel.dispose()
