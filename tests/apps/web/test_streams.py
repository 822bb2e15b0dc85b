"""Stream rules of spec 12 §4.3: in-flight replay, projections, the index stream, bounded queues."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.apps.web import streams as streams_module
from pydsh.apps.web.fanout import Subscriber
from pydsh.apps.web.sse import stream_frames
from pydsh.apps.web.views import READ_CACHE
from tests.apps.web.conftest import Web
from tests.apps.web.test_api import read_stream, turn_ended, until
from tests.apps.web.test_session_pages import stored


@pytest.mark.parametrize("script", [[{"hang": True}]])
async def test_a_stream_opened_mid_attempt_replays_its_frames_so_far(web: Web) -> None:
    sid = (await web.new_session("hang on"))["session"]["sessionId"]
    await until(lambda: web.server.hub.streams.inflight.get(sid))
    frames = await read_stream(web, sid, lambda fs: any(f[0] == "assistant-stream" for f in fs))
    assert frames[0][0] == "hello" and frames[0][1]["status"] == "running"
    start = next(f[1] for f in frames if f[0] == "assistant-stream")
    assert start["type"] == "start" and start["turn"] == 1 and start["step"] == 1
    assert start["startedAfterSeq"] == max(f[1]["seq"] for f in frames if f[0] == "session-event")
    assert (await web.post(f"/api/sessions/{sid}/cancel", {})).status_code == 202
    await web.idle(sid)
    assert not web.server.hub.streams.inflight.get(sid)


READ = {"name": "read", "arguments": {"file_path": "hello.txt"}}


@pytest.mark.parametrize("script", [[{"tool_calls": [READ, READ]}, {"reasoning": "so", "text": "done"}]])
async def test_only_the_chunks_the_page_draws_are_streamed(web: Web) -> None:
    """Tool-call deltas, block and usage marks arrive in the committed events; the stream carries only the
    live text and reasoning the page draws, so a tool-heavy turn does not send thousands of ignored frames."""
    sid = (await web.new_session())["session"]["sessionId"]
    reader = asyncio.ensure_future(read_stream(web, sid, turn_ended))
    await asyncio.sleep(0.1)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "read twice"})
    frames = await asyncio.wait_for(reader, 10)
    streamed = [f[1] for f in frames if f[0] == "assistant-stream"]
    chunks = {f["chunk"]["type"] for f in streamed if f["type"] == "chunk"}
    assert chunks == {"text-delta", "reasoning-delta"}
    assert [f["type"] for f in streamed].count("start") == 2


async def test_projection_frames_follow_a_turn(web: Web) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    reader = asyncio.ensure_future(
        read_stream(
            web,
            sid,
            lambda fs: (
                {"tokenUsage", "sessionStats"} <= {f[1]["key"] for f in fs if f[0] == "projection"} and turn_ended(fs)
            ),
        )
    )
    await asyncio.sleep(0.1)
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "count me"})
    frames = await asyncio.wait_for(reader, 10)
    latest = {f[1]["key"]: f[1] for f in frames if f[0] == "projection"}
    assert latest["tokenUsage"]["value"]["outputTokens"] >= 0
    assert isinstance(latest["sessionStats"]["asOfSeq"], int)


async def test_the_index_stream_upserts_sessions(web: Web) -> None:
    seen: list[tuple[str, Any]] = []

    async def follow() -> None:
        async with web.client.stream("GET", "/api/events") as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    seen.append((event, json.loads(line[5:])))
                    if event == "session" and seen[-1][1]["status"] == "idle" and seen[-1][1]["stats"]["turns"] == 1:
                        return

    reader = asyncio.ensure_future(follow())
    await until(lambda: seen)
    assert seen[0][0] == "hello"
    assert seen[0][1]["sessions"] == [] and seen[0][1]["workspaces"][0]["path"] == str(web.workspace)
    await web.new_session("index me")
    await asyncio.wait_for(reader, 10)
    rows = [data for event, data in seen if event == "session"]
    assert rows[-1]["title"] == "index me"
    assert len(rows) <= 8


async def test_a_full_queue_drops_the_subscriber_with_overflow() -> None:
    sub = Subscriber(limit=2)
    for seq in range(5):
        sub.put(("session-event", {"seq": seq}, seq))
    assert sub.overflowed
    frames = [f async for f in stream_frames([("hello", {}, None), ("session-event", {"seq": 0}, 0)], sub, None)]
    assert [f["event"] for f in frames] == ["hello", "session-event", "overflow"]
    assert json.loads(frames[-1]["data"]) == {"lastSentSeq": 0}


async def test_replay_and_live_frames_are_deduplicated_by_seq() -> None:
    sub = Subscriber()
    for seq in (1, 2, 3):
        sub.put(("session-event", {"seq": seq}, seq))
    sub.put(("status", {"status": "idle"}, None))
    sub.close()
    replay = [("hello", {}, None), ("session-event", {"seq": 1}, 1), ("session-event", {"seq": 2}, 2)]
    frames = [f async for f in stream_frames(replay, sub, 0)]
    assert [f.get("id") for f in frames] == [None, "1", "2", "3", None]
    after = [f async for f in stream_frames([("session-event", {"seq": 1}, 1)], Subscriber(closed=True), 1)]
    assert after == []


async def test_the_index_stream_shows_a_closed_session_offline(web: Web) -> None:
    sid = (await web.new_session("close me"))["session"]["sessionId"]
    await web.idle(sid)
    seen: list[dict[str, Any]] = []

    async def follow() -> None:
        async with web.client.stream("GET", "/api/events") as response:
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    seen.append({"event": event, **json.loads(line[5:])})
                    if event == "session" and seen[-1]["status"] == "offline":
                        return

    reader = asyncio.ensure_future(follow())
    await until(lambda: seen)
    await web.host.agent(sid).close()
    await asyncio.wait_for(reader, 10)
    assert seen[-1]["sessionId"] == sid and seen[-1]["title"] == "close me"


async def test_a_stored_sessions_full_read_is_kept_while_watched_and_bounded(
    web: Web, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored log read in full stays in memory while a stream of it is open (the page asks for its events and
    projections again) and a moment after the last one closes (a reloaded page finds it), then goes; it is not
    kept when nobody watches, and at most READ_CACHE reads are kept at any time."""
    monkeypatch.setattr(streams_module, "RELEASE_DELAY_S", 0.3)
    views = web.server.hub.views
    sid = await stored(isolated_home, web.workspace, "watched")
    watching = asyncio.ensure_future(read_stream(web, sid, lambda frames: False))
    await until(lambda: sid in views.kept() and web.server.hub.streams.sessions_topic.has(sid))
    await read_stream(web, sid, lambda frames: frames[0][0] == "hello")
    assert views.kept() == [sid], "a second stream closing let the read go while the first still watches"
    watching.cancel()
    await until(lambda: not web.server.hub.streams.sessions_topic.has(sid))
    assert views.kept() == [sid], "the read went at once, so a reloaded page reads the log again"
    back = asyncio.ensure_future(read_stream(web, sid, lambda frames: False))
    await until(lambda: web.server.hub.streams.sessions_topic.has(sid))
    await asyncio.sleep(0.5)
    assert views.kept() == [sid], "the read went while a stream opened within the grace watches it"
    back.cancel()
    await until(lambda: views.kept() == [])
    assert (await web.client.get(f"/api/sessions/{sid}/events")).status_code == 200
    assert views.kept() == [], "a read nobody watches was kept"
    others = [await stored(isolated_home, web.workspace, f"other {n}") for n in range(READ_CACHE + 2)]
    streams = [asyncio.ensure_future(read_stream(web, other, lambda frames: False)) for other in others]
    await until(lambda: all(web.server.hub.streams.sessions_topic.has(other) for other in others))
    for other in others:
        assert (await web.client.get(f"/api/sessions/{other}/events")).status_code == 200
        assert len(views.kept()) <= READ_CACHE
    assert views.kept() == others[-READ_CACHE:]
    for each in streams:
        each.cancel()


async def test_an_idle_session_nobody_watches_is_let_go_and_the_next_prompt_resumes_it(
    web: Web, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that runs for days must not keep every session it ever ran: a root agent that is idle with
    nothing ahead and no stream open goes a moment after its turn (its log is on disk). A watched one stays,
    and so does one a plugin keeps (an armed reminder, a goal's next round)."""
    monkeypatch.setattr(streams_module, "RELEASE_DELAY_S", 0.3)
    monkeypatch.setattr(streams_module, "TRIM_DELAY_S", 0.05)
    collected: list[bool] = []
    monkeypatch.setattr(streams_module.memory, "collect", lambda: collected.append(True))
    host, topic = web.server.hub.host, web.server.hub.streams.sessions_topic
    sid = (await web.new_session("first"))["session"]["sessionId"]
    await web.idle(sid)
    await until(lambda: host.agent(sid) is None)
    await until(
        lambda: collected
    )  # what the closed session left in reference cycles is freed, not kept till a full pass
    response = await web.post(f"/api/sessions/{sid}/prompt", {"text": "second", "mode": "queue"})
    assert response.status_code == 202, response.text
    await web.idle(sid)
    assert [e["type"] for e in host.agent(sid).events].count("turn/end") == 2

    watching = asyncio.ensure_future(read_stream(web, sid, lambda frames: False))
    await until(lambda: topic.has(sid))
    await asyncio.sleep(0.6)
    assert host.agent(sid) is not None, "a session the page shows was let go"
    keep = True
    web.host.ctx.require(AGENTS).add_keeper(web.host.ctx, lambda agent: keep and agent.id == sid)
    watching.cancel()
    await until(lambda: not topic.has(sid))
    await asyncio.sleep(0.6)
    assert host.agent(sid) is not None, "a session a plugin keeps was let go"
    keep = False
    await web.post(f"/api/sessions/{sid}/prompt", {"text": "third", "mode": "queue"})
    await web.idle(sid)
    await until(lambda: host.agent(sid) is None)
    assert (await web.client.get(f"/api/sessions/{sid}")).json()["session"]["status"] == "offline"


def gated(gates: list[asyncio.Event], answer: Callable[[str, int], dict[str, Any]]) -> Any:
    """A stand-in for a server read of ``(hub, key)``: each call waits on its own gate (appended to ``gates``)
    and then answers ``answer(key, its call number)``, so a test decides which of two reads finishes first."""

    async def read(_hub: Any, key: str) -> dict[str, Any]:
        gate = asyncio.Event()
        gates.append(gate)
        build = len(gates)
        await gate.wait()
        return answer(key, build)

    return read


async def test_an_older_agents_tree_that_finishes_last_is_not_sent(web: Web, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds of one root's tree run at once (a change arrived while the first was reading logs); if the
    older finishes last, sending it would leave the page's chip on a stale count until the next change."""
    from pydsh.apps.web import agents

    gates: list[asyncio.Event] = []
    monkeypatch.setattr(agents, "agent_tree", gated(gates, lambda root, build: {"sessionId": root, "build": build}))
    streams = web.server.hub.streams
    sub = Subscriber()
    streams.sessions_topic.add("root", sub)
    streams._spawn_agents("root")
    streams._spawn_agents("root")
    await until(lambda: len(gates) == 2)
    gates[1].set()
    await until(lambda: sub.frames)
    gates[0].set()
    await asyncio.sleep(0.05)
    assert [(name, data["root"]["build"]) for name, data, _id in sub.frames] == [("agents", 2)]
    streams.sessions_topic.remove("root", sub)


LONG = "A long answer line.\n" * 2000


@pytest.mark.parametrize("script", [[{"reasoning": "brief", "text": LONG}]])
async def test_a_long_answer_reaches_the_page_without_the_stream_texts_it_repeats(web: Web) -> None:
    """The page parses a long answer's text once (the message), not three times: events pages and the stream's
    replay carry its stream record without texts and say so, while the log download is the event as written."""
    sid = (await web.new_session("answer at length"))["session"]["sessionId"]
    await web.idle(sid)
    download = (await web.client.get(f"/api/sessions/{sid}/log")).text
    log = [json.loads(line) for line in download.splitlines()[1:] if line.strip()]
    logged = next(e for e in log if e["type"] == "assistant/message")
    text_chunks = [r for r in logged["data"]["stream"] if r["type"] == "text-chunks"]
    assert "".join(t for r in text_chunks for t in r["texts"]) == LONG
    page = (await web.client.get(f"/api/sessions/{sid}/events")).json()["events"]
    frames = await read_stream(web, sid, lambda fs: any(f[0] == "hello" for f in fs) and len(fs) > len(page))
    replayed = [f[1] for f in frames if f[0] == "session-event"]
    for events in (page, replayed):
        sent = next(e for e in events if e["type"] == "assistant/message")
        assert sent["data"]["streamElided"] is True
        assert sent["data"]["message"] == logged["data"]["message"]
        assert LONG not in json.dumps(sent["data"]["stream"])
        chunks = [r for r in sent["data"]["stream"] if r["type"] == "text-chunks"]
        assert sum(r["chars"] for r in chunks) == len(LONG) and all("time0" in r for r in chunks)
        short = next(e for e in events if e["type"] == "user/message")
        assert short == next(e for e in log if e["seq"] == short["seq"])


async def test_an_older_delivery_list_that_finishes_last_is_not_sent(web: Web, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a sender's delivery states: a stale list sent last would leave a card on "delivered"."""
    from pydsh.apps.web import messages

    gates: list[asyncio.Event] = []
    answer = gated(gates, lambda sender, build: {"messages": [{"to": "target", "state": f"build {build}"}]})
    monkeypatch.setattr(messages, "delivery", answer)
    feed = web.server.hub.streams.deliveries
    sub = Subscriber()
    web.server.hub.streams.sessions_topic.add("sender", sub)
    first = asyncio.ensure_future(feed._send("sender"))
    second = asyncio.ensure_future(feed._send("sender"))
    await until(lambda: len(gates) == 2)
    gates[1].set()
    await second
    gates[0].set()
    await first
    assert [(name, data["messages"][0]["state"]) for name, data, _id in sub.frames] == [("messages", "build 2")]
    web.server.hub.streams.sessions_topic.remove("sender", sub)
