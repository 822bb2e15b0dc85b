"""A stored session's first open answers from a digest and a tail read of its log (issue 24): the same detail
and the same last turns as the full read, on real logs: tools and to-dos, a renamed title, a compacted
session, a kept queued prompt, a log cut inside a turn (repair closers) and one with a torn last frame."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

from pydsh.agent.keys import AGENTS
from pydsh.apps.web.views import METER_KEYS
from pydsh.session.persistence.jsonl import ZSTD, JsonlPersistence, log_text
from tests.apps.web.conftest import Web, open_web
from tests.apps.web.test_api import read_stream, until
from tests.apps.web.test_truth import queue_behind_a_hanging_turn

TODOS = {
    "tool_calls": [
        {
            "name": "todo_write",
            "arguments": {
                "todos": [{"content": "read", "status": "completed"}, {"content": "write", "status": "in_progress"}]
            },
        }
    ]
}
READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "hello.txt"}}]}
SCRIPT = [READ, TODOS, {"text": "first answer"}, READ, {"text": "second answer"}]
COMPACT = [{"text": "Hello back. " * 200}, {"text": "A short summary.", "purpose": "compaction"}]
TAILS = ("turns:0", "turns:1", "turns:2", "turns:9")


async def tools_and_title(web: Web) -> str:
    """A session of two turns with tools and to-dos, then renamed by the user."""
    sid = str((await web.new_session("Read hello.txt and plan"))["session"]["sessionId"])
    await web.idle(sid)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "Read it again"})
    await until(functools.partial(answered, web, sid, 2))
    await web.put(f"/api/sessions/{sid}/title", {"title": "Renamed by the user"})
    return sid


async def compacted(web: Web) -> str:
    """A session compacted by ``/compact`` after its first turn."""
    sid = str((await web.new_session("Say something"))["session"]["sessionId"])
    await web.idle(sid)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "/compact"})
    await until(functools.partial(answered, web, sid, 2))
    return sid


async def sessions_in(home: Path, where: Path) -> list[str]:
    """The sessions of :func:`tools_and_title` and :func:`compacted`, each written by its own web server
    (a scripted model serves one session), which then stopped."""
    ids = []
    for n, (script, write) in enumerate(((SCRIPT, tools_and_title), (COMPACT, compacted))):
        (where / str(n)).mkdir(parents=True)
        async for web in open_web(script, home, where / str(n)):
            ids.append(await write(web))
            web.host.assert_consumed()
    return ids


def answered(web: Web, sid: str, turns: int) -> bool:
    """Whether ``sid`` finished ``turns`` turns and is idle."""
    agent = web.host.ctx.require(AGENTS).get(sid)
    ended = sum(e["type"] == "turn/end" for e in agent.session.events)
    return ended >= turns and agent.status != "running"


def log_of(home: Path, sid: str) -> Path:
    [path] = list(home.glob(f"sessions/*/{sid}/{ZSTD}"))
    return path


def rewrite(path: Path, keep: int, torn: bytes = b"") -> None:
    """The log cut after its first ``keep`` event lines (header kept), framed again; ``torn`` bytes after."""
    lines = log_text(path.read_bytes(), path, True).splitlines(keepends=True)[: keep + 1]
    store = JsonlPersistence(path.parent.parent.parent, compression="zstd")
    path.write_bytes(b"".join(store.frame(line, True) for line in lines) + torn)


async def fast_then_full(web: Web, sid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first (digest) answers of the detail and of each tail, then the same after a full read."""
    seen: list[dict[str, Any]] = []
    for _ in range(2):
        detail = (await web.client.get(f"/api/sessions/{sid}")).json()
        tails = [(await web.client.get(f"/api/sessions/{sid}/events", params={"tail": t})).json() for t in TAILS]
        seen.append({"detail": detail, "tails": tails})
        if len(seen) == 1:  # a stream reads the log whole and keeps the read while it watches
            watching = asyncio.ensure_future(read_stream(web, sid, lambda frames: False))
            await until(lambda: sid in web.server.hub.views.kept())
    watching.cancel()
    return seen[0], seen[1]


def same_but_meter(fast: dict[str, Any], full: dict[str, Any]) -> None:
    """The digest's detail names the meter values it defers and is otherwise the full read's."""
    assert fast["detail"].pop("deferred") == list(METER_KEYS)
    assert "deferred" not in full["detail"]
    for key in METER_KEYS:
        assert fast["detail"]["projections"].pop(key) is None
        full["detail"]["projections"].pop(key)
    assert fast == full


async def test_first_open_of_stored_sessions_matches_the_full_read(isolated_home: Path, tmp_path: Path) -> None:
    ids = await sessions_in(isolated_home, tmp_path / "writer")
    (tmp_path / "reader").mkdir()
    async for web in open_web([], isolated_home, tmp_path / "reader"):
        first, squeezed = [await fast_then_full(web, sid) for sid in ids]
    for fast, full in (first, squeezed):
        same_but_meter(fast, full)
    detail = first[1]["detail"]
    assert detail["projections"]["todos"] == TODOS["tool_calls"][0]["arguments"]["todos"]
    assert detail["projections"]["title"] == {"title": "Renamed by the user", "source": {"kind": "user"}}
    assert detail["session"]["stats"]["turns"] == 2
    events = squeezed[1]["tails"][-1]["events"]
    assert [e["type"] for e in events if e["type"].startswith("compaction/")] == [
        "compaction/start",
        "compaction/summary",
        "compaction/end",
    ]


async def test_first_open_of_cut_and_torn_logs_matches_the_full_read(isolated_home: Path, tmp_path: Path) -> None:
    [sid, _] = await sessions_in(isolated_home, tmp_path / "writer")
    path = log_of(isolated_home, sid)
    lines = log_text(path.read_bytes(), path, True).splitlines()
    second_turn = [i for i, line in enumerate(lines) if line.startswith(b'{"type":"turn/start"')][1]
    cuts = {"inside a tool call": second_turn + 8, "after a turn start": second_turn + 1}
    (tmp_path / "reader").mkdir()
    for n, (why, keep) in enumerate(cuts.items()):
        rewrite(path, keep, torn=b"\x28\xb5\x2f\xfd" if n else b"")
        async for web in open_web([], isolated_home, tmp_path / "reader"):
            fast, full = await fast_then_full(web, sid)
            events = full["tails"][1]["events"]
            assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == {"kind": "interrupted"}, why
            assert full["detail"]["lastSeq"] == events[-1]["seq"] >= keep, why
            same_but_meter(fast, full)


async def test_an_offline_sessions_kept_prompt_matches_and_counts_in_the_list(
    isolated_home: Path, tmp_path: Path
) -> None:
    sid, message_id = await queue_behind_a_hanging_turn(isolated_home, tmp_path / "first")
    (tmp_path / "second").mkdir()
    async for web in open_web([], isolated_home, tmp_path / "second"):
        [row] = (await web.client.get("/api/sessions")).json()["sessions"]
        assert (row["sessionId"], row["status"], row["queued"]) == (sid, "offline", 1)
        fast, full = await fast_then_full(web, sid)
        assert [q["messageId"] for q in fast["detail"]["pending"]["queued"]] == [message_id]
        same_but_meter(fast, full)
