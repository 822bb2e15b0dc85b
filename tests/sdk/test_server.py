"""The SDK server end to end (spec 06 §13): the conformance list with the published client and ours, plus raw cases.

Each ``client`` case runs twice — with ``deepseek-harness-sdk`` 0.2.1rc2 unmodified and with
``pydsh.sdk.client.Harness`` — against ``pydsh --profile sdk`` and a loopback mock model; the
``wire`` fixture checks that every stdout line either client read is a JSON-RPC frame. Raw cases
write NDJSON by hand. Bounds on waiting are safety nets against hangs, never timing assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from pydsh.apps.sdk import HELP
from pydsh.session.persistence.jsonl import JsonlPersistence
from tests.conftest import FIXTURES
from tests.sdk.conftest import PYDSH, REPO, SAFETY_S, ClientKind, Raw, ThreadedMock, Wire, error_of, hold_until_idle

TEXT = {"text": "Hello there."}
SUBAGENT_CALL = {"tool_calls": [{"name": "subagent", "arguments": {"description": "say hi", "prompt": "Say hi"}}]}


def reference_stream(name: str) -> list[tuple[str, str | None, int | None]]:
    """(method, event type, seq) of a reference fixture, without the reference-only delivery events."""
    out = []
    for line in (FIXTURES / name).read_text().splitlines():
        row = json.loads(line)
        event = row["params"].get("event") or {}
        if event.get("type") != "session-log-deepseek/delivery-accepted":
            out.append((row["method"], event.get("type"), event.get("seq")))
    return out


def stream_of(notifications: list[Any]) -> list[tuple[str, str | None, int | None]]:
    out = []
    for note in notifications:
        event = note.payload.get("event") or {}
        out.append((note.method, event.get("type"), event.get("seq")))
    return out


def until(predicate: Callable[[], Any]) -> Any:
    """Poll ``predicate`` until truthy (safety-bounded)."""
    deadline = time.monotonic() + SAFETY_S
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not reached within the safety bound"
        time.sleep(0.02)
    return value


def index_of(frames: list[dict[str, Any]], predicate: Callable[[dict[str, Any]], bool], start: int = 0) -> int:
    return next(i for i in range(start, len(frames)) if predicate(frames[i]))


def is_event(session_id: str, event_type: str, **data: Any) -> Callable[[dict[str, Any]], bool]:
    def check(frame: dict[str, Any]) -> bool:
        if frame.get("method") != "session.event" or frame["params"]["sessionId"] != session_id:
            return False
        event = frame["params"]["event"]
        return bool(event["type"] == event_type and all(event["data"].get(k) == v for k, v in data.items()))

    return check


def is_status(session_id: str, status: str) -> Callable[[dict[str, Any]], bool]:
    def check(frame: dict[str, Any]) -> bool:
        params = frame.get("params") or {}
        return frame.get("method") == "session.status" and params == {"sessionId": session_id, "status": status}

    return check


def settled_tree(wire: Wire, root: str) -> list[dict[str, Any]] | None:
    """All frames once ``subagent.finished`` was sent and the root went idle after it."""
    frames = wire.frames()
    finished = [i for i, f in enumerate(frames) if f.get("method") == "subagent.finished"]
    if finished and any(is_status(root, "idle")(f) for f in frames[finished[-1] :]):
        return frames
    return None


def stored_events(home: Path, session_id: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        handle = await JsonlPersistence(home / "sessions").open(session_id, "read")
        try:
            return await handle.read()
        finally:
            await handle.close()

    return asyncio.run(read())


def check_ordering(frames: list[dict[str, Any]]) -> None:
    """O1 (per-session seq +1), O2 (started before any frame of the child), alternating statuses and O4
    (a turn starts only while running)."""
    notes = [f for f in frames if "method" in f]
    children = {f["params"]["childSessionId"] for f in notes if f["method"] == "subagent.started"}
    last_seq: dict[str, int] = {}
    status: dict[str, str] = {}
    announced: set[str] = set()
    for frame in notes:
        params = frame["params"]
        if frame["method"] == "subagent.started":
            assert params["childSessionId"] not in announced
            announced.add(params["childSessionId"])
            continue
        sid = params.get("sessionId") or params["childSessionId"]
        assert sid not in children or sid in announced, frame
        if frame["method"] == "session.event":
            seq = params["event"]["seq"]
            assert sid not in last_seq or seq == last_seq[sid] + 1, (sid, seq)
            last_seq[sid] = seq
            if params["event"]["type"] == "turn/start":
                assert status.get(sid) == "running", frame
        elif frame["method"] == "session.status":
            assert status.get(sid, "idle") != params["status"], frame
            status[sid] = params["status"]


@contextmanager
def rejected(client: ClientKind, message: str) -> Iterator[None]:
    """The block raises the client's ``JsonRpcError`` with exactly ``message``."""
    with pytest.raises(client.json_rpc_error) as caught:
        yield
    assert str(caught.value) == message


def write_patch(path: Path, ops: list[Any]) -> Path:
    path.write_text(yaml.safe_dump(ops))
    return path


# -- #1, #2, #5: launch and initialize ----------------------------------------------------------


def test_launch_argv_env_and_nothing_before_the_initialize_response(
    client: ClientKind, mock: Callable[..., ThreadedMock], tmp_path: Path
) -> None:
    patch = write_patch(tmp_path / "a.yml", [])
    model = mock([])
    harness = client.harness(model.base_url, patches=(str(patch),))
    with harness:
        assert client.wire.argv[-1] == [PYDSH, "--profile", "sdk", "--patch", str(patch.resolve())]
        assert client.wire.envs[-1]["DSH_HOME"] == str(client.home)
        first = client.wire.frames()[0]
        assert first["id"] is not None and "result" in first
        assert first["result"]["serverInfo"] == {"name": "deepseek-harness-sdk-runtime", "version": "0.0.1"}
        assert "protocolVersion" not in json.dumps(first)
    assert client.exit_code(harness) == 0
    client.wire.frames()


def test_unknown_model_is_accepted(client: ClientKind) -> None:
    with client.harness(model="no-such-model"):
        assert client.wire.frames()[0]["result"]["serverInfo"]["name"] == "deepseek-harness-sdk-runtime"


# -- #3, #4: initialize errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "initialize maxTokens must be a positive safe integer"),
        ({"max_tokens": 1.5}, "initialize maxTokens must be a positive safe integer"),
        ({"max_tokens": True}, "initialize maxTokens must be a positive safe integer"),
        ({"reasoning_effort": ""}, "initialize reasoningEffort must be a non-empty string"),
        ({"provider": "nope"}, 'no adapter registered for provider "nope"'),
        (
            {"reasoning_effort": "ultra"},
            'provider "deepseek-official" model "deepseek-v4-flash" does not support reasoning effort "ultra"',
        ),
    ],
)
def test_initialize_errors_then_shutdown_answers(client: ClientKind, options: dict[str, Any], message: str) -> None:
    harness = client.harness(**options)
    with pytest.raises(client.json_rpc_error) as caught:
        harness.start()
    assert caught.value.code == -32603  # type: ignore[attr-defined]
    assert str(caught.value).split("\n")[0] == message
    frames = client.wire.frames()
    assert error_of(frames[0]) == message
    assert frames[-1]["result"] == {}
    assert client.exit_code(harness) == 0


# -- #7, #8, #9: text turns ---------------------------------------------------------------------


def test_text_turn_matches_the_reference_stream(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    model = mock([TEXT, {"text": "Again."}])
    with client.harness(model.base_url) as harness:
        first = harness.run("hi", session_id="t1")
        second = harness.run("more", session_id="t1")
    frames = client.wire.frames()
    message_id = next(f["result"]["messageId"] for f in frames if "messageId" in (f.get("result") or {}))
    assert isinstance(message_id, str)
    assert first.final_response == "Hello there."
    assert first.finish_reason == "completed"
    receipt = first.events[0]
    assert receipt["type"] == "agent/inbox/spliced"
    assert receipt["data"]["inserted"][0]["id"] == message_id
    assert first.notifications[-1].payload == {"sessionId": "t1", "status": "idle"}
    expected = reference_stream("reference-sdk-text-turn.notifications.jsonl")
    ours = stream_of(first.notifications)
    assert [(m, t) for m, t, _ in ours] == [(m, t) for m, t, _ in expected]
    assert [s for _, _, s in ours] == [s if s is None or s < 13 else s - 1 for _, _, s in expected]
    check_ordering(frames)
    events = client.wire.events("t1")
    assert [e["seq"] for e in events] == list(range(len(events)))
    for event in events:
        assert list(event)[:4] == ["type", "seq", "time", "data"]
        assert isinstance(event["type"], str) and isinstance(event["data"], dict)
        assert type(event["time"]) is int
    assert second.final_response == "Again."
    assert second.events[0]["seq"] == first.events[-1]["seq"] + 1
    assert [e["data"]["turn"] for e in second.events if e["type"] == "turn/start"] == [2]
    history = json.dumps(model.requests[1]["body"]["messages"])
    assert "hi" in history and "Hello there." in history


# -- #11: provider error ------------------------------------------------------------------------


def test_auth_error_ends_the_turn_without_raising(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    model = mock(["auth_error"])
    with client.harness(model.base_url) as harness:
        result = harness.run("hi", session_id="t1")
    assert (result.final_response, result.finish_reason) == ("", "error")
    types = [e["type"] for e in result.events]
    assert types[-3:] == ["assistant/attempt", "step/end", "turn/end"]
    error = result.events[-1]["data"]["reason"]["error"]
    assert (error["code"], error["status"]) == ("AUTH", 401)
    assert isinstance(error["message"], str)
    assert result.notifications[-1].payload == {"sessionId": "t1", "status": "idle"}
    client.wire.frames()


# -- #15, #16, #17, #23: subagents --------------------------------------------------------------


def test_subagent_tree_notifications_and_max_tokens(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    hold = hold_until_idle(client.wire.frames, "t1", "Say hi")
    model = mock([SUBAGENT_CALL, {"text": "same"}, {"text": "same"}, {"text": "root done"}], hold=hold)
    with client.harness(model.base_url, max_tokens=5) as harness:
        result = harness.run("delegate", session_id="t1")
        frames = until(lambda: settled_tree(client.wire, "t1"))
    check_ordering(frames)
    started = next(f for f in frames if f.get("method") == "subagent.started")
    child = started["params"]["childSessionId"]
    assert started["params"] == {"parentSessionId": "t1", "childSessionId": child}
    assert child != "t1"
    at_started = frames.index(started)
    assert index_of(frames, is_event("t1", "tool/call")) < at_started
    carries_child = [i for i, f in enumerate(frames) if child in json.dumps(f.get("params", {})) and f is not started]
    assert min(carries_child) > at_started
    assert result.notifications[-1].payload == {"sessionId": "t1", "status": "idle"}
    assert "subagent.started" in [n.method for n in result.notifications]
    root_types = [e["type"] for e in result.events]
    assert "subagent/catalog" in root_types
    tool_result = next(e for e in result.events if e["type"] == "tool/result")
    assert tool_result["data"]["message"]["content"][0]["text"] == "started subagent agent-1"

    child_events = client.wire.events(child)
    stored = stored_events(client.home, child)
    first_seq = child_events[0]["seq"]
    assert first_seq > 0 and [e["seq"] for e in child_events] == list(range(first_seq, stored[-1]["seq"] + 1))
    assert "subagent/descriptor" in [e["type"] for e in stored[:first_seq]]

    child_idle = index_of(frames, is_status(child, "idle"))
    child_end = max(i for i, f in enumerate(frames) if is_event(child, "turn/end")(f))
    notice = index_of(
        frames,
        lambda f: (
            is_event("t1", "agent/inbox/spliced")(f)
            and any(m["source"]["kind"] == "subagent-settled" for m in f["params"]["event"]["data"]["inserted"])
        ),
    )
    running = index_of(frames, is_status("t1", "running"), notice)
    finished = index_of(frames, lambda f: f.get("method") == "subagent.finished")
    turn_two = index_of(frames, is_event("t1", "turn/start", turn=2))
    root_idle = index_of(frames, is_status("t1", "idle"), turn_two)
    assert child_end < child_idle < notice < running < finished < turn_two < root_idle
    params = frames[finished]["params"]
    assert list(params) == [
        "provider",
        "agentId",
        "parentSessionId",
        "childSessionId",
        "status",
        "stopReason",
        "lastAssistantMessage",
    ]
    assert {k: params[k] for k in list(params)[:6]} == {
        "provider": "spawn",
        "agentId": child,
        "parentSessionId": "t1",
        "childSessionId": child,
        "status": "ok",
        "stopReason": "completed",
    }
    assert params["lastAssistantMessage"] == [{"type": "text", "text": "same"}]

    headers = [e for e in client.wire.events("t1") + child_events if e["type"] == "request/header"]
    assert {e["data"]["header"]["config"]["maxTokens"] for e in headers} == {5}
    assert {r["body"]["max_tokens"] for r in model.requests} == {5}


@pytest.mark.parametrize(("env", "status"), [({}, "ok"), ({"DSH_MAX_TOKENS_AS_SUCCESS": "false"}, "error")])
def test_child_max_tokens_status_follows_max_tokens_as_success(
    client: ClientKind,
    mock: Callable[..., ThreadedMock],
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    status: str,
) -> None:
    monkeypatch.delenv("DSH_MAX_TOKENS_AS_SUCCESS", raising=False)
    model = mock([SUBAGENT_CALL, "max_tokens", "max_tokens", {"text": "ok"}])
    with client.harness(model.base_url, env=env) as harness:
        harness.run("delegate", session_id="t1")
        finished = [f for f in until(lambda: settled_tree(client.wire, "t1")) if f.get("method") == "subagent.finished"]
    assert finished[0]["params"]["stopReason"] == "max-tokens"
    assert finished[0]["params"]["status"] == status


def test_session_wait_answers_after_the_settlement_frames(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock]
) -> None:
    model = mock([SUBAGENT_CALL, {"text": "same"}, {"text": "same"}, {"text": "root done"}])
    peer = raw(model.base_url)
    model.server.hold = hold_until_idle(peer.frames, "t1", "Say hi")
    peer.initialize()
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "go"}]})
    peer.wait_for(lambda frames: any(is_status("t1", "idle")(f) for f in frames))
    response = peer.request("w", "session/wait", {"sessionId": "t1"})
    assert response["result"] == {}
    frames = peer.frames()
    check_ordering(frames)
    at = frames.index(response)
    assert any(f.get("method") == "subagent.finished" for f in frames[:at])
    turn_two = index_of(frames, is_event("t1", "turn/start", turn=2))
    assert index_of(frames, is_status("t1", "idle"), turn_two) < at
    assert error_of(peer.request("w2", "session/wait", {"sessionId": "nope"})) == "unknown SDK session: nope"
    assert error_of(peer.request("w3", "session/wait", {"sessionId": 3})) == "session/wait requires a sessionId string"


# -- #18, #19, #20: resume ----------------------------------------------------------------------


def test_resume_in_a_new_process_continues_history(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    model = mock([TEXT, {"text": "Second."}])
    with client.harness(model.base_url) as harness:
        harness.run("hi", session_id="t1")
    stored = stored_events(client.home, "t1")
    with client.harness(model.base_url) as harness:
        session = harness.resume_session("t1")
        before = len(client.wire.lines)
        result = session.run("again")
    receipt_at = before + next(
        i for i, f in enumerate(client.wire.frames()[before:]) if f.get("method") == "session.event"
    )
    assert all("method" not in f for f in client.wire.frames()[before - 1 : receipt_at])
    assert result.events[0]["seq"] == len(stored) + 1
    assert result.final_response == "Second."
    assert [e["data"]["turn"] for e in result.events if e["type"] == "turn/start"] == [2]
    assert "Hello there." in json.dumps(model.requests[1]["body"]["messages"])
    assert stored_events(client.home, "t1")[len(stored)]["type"] == "session/end-seed"


def test_resume_errors_and_prompting_a_persisted_session(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    model = mock([TEXT])
    with client.harness(model.base_url) as harness:
        harness.run("hi", session_id="t1")
    with client.harness(model.base_url) as harness:
        with rejected(client, 'session "t1" already exists'):
            harness.run("again", session_id="t1")
        with rejected(client, 'session "missing" not found'):
            harness.resume_session("missing")
        with rejected(client, "session/resume requires a non-empty sessionId string"):
            harness.resume_session("")
        harness.resume_session("t1")
        with rejected(client, "SDK session is already open or opening: t1"):
            harness.resume_session("t1")
    client.wire.frames()


# -- #21, #22: working directory ----------------------------------------------------------------


def test_working_directory_get_and_set(client: ClientKind, ws: Path) -> None:
    (ws / "sub").mkdir()
    with client.harness() as harness:
        session = client.session(harness, "w1")
        assert session.get_working_directory() == str(ws)
        before = len(client.wire.lines)
        assert session.set_working_directory("sub") == str(ws / "sub")
        assert session.set_working_directory(str(ws / "sub")) == str(ws / "sub")
        with rejected(client, 'working-directory: directory does not exist: "nope"'):
            session.set_working_directory("nope")
    frames = client.wire.frames()[before:]
    change, splice, response = frames[0], frames[1], frames[2]
    assert change["params"]["event"]["type"] == "working-directory/change"
    assert change["params"]["event"]["data"] == {"cwd": str(ws / "sub")}
    data = splice["params"]["event"]["data"]
    assert (splice["params"]["event"]["type"], data["target"]) == ("agent/inbox/spliced", "next-step")
    note = data["inserted"][0]
    assert note["source"] == {"kind": "working-directory"}
    assert note["content"] == [
        {"type": "text", "text": f'The working directory changed from "{ws}" to "{ws / "sub"}".'}
    ]
    assert response["result"] == {"cwd": str(ws / "sub")}
    assert frames[3]["result"] == {"cwd": str(ws / "sub")}
    assert not [f for f in client.wire.frames() if f.get("method") == "session.status"]


# -- #24: close ---------------------------------------------------------------------------------


def test_close_answers_shutdown_last_and_releases_the_log(
    client: ClientKind, mock: Callable[..., ThreadedMock]
) -> None:
    model = mock([TEXT])
    harness = client.harness(model.base_url)
    with harness:
        harness.run("hi", session_id="t1")
    frames = client.wire.frames()
    assert frames[-1]["result"] == {} and "method" not in frames[-1]
    assert client.exit_code(harness) == 0
    assert stored_events(client.home, "t1")[-1]["type"] == "turn/end"

    async def lock_is_free() -> None:
        handle = await JsonlPersistence(client.home / "sessions").open("t1", "write")
        await handle.close()

    asyncio.run(lock_is_free())


# -- #27, #28, #29 ------------------------------------------------------------------------------


def test_plugin_print_goes_to_stderr(client: ClientKind, mock: Callable[..., ThreadedMock], tmp_path: Path) -> None:
    patch = write_patch(tmp_path / "p.yml", [{"insert": [{"id": "printer", "name": "tests.sdk.plugins:printer"}]}])
    model = mock([TEXT])
    with client.harness(model.base_url, patches=(str(patch),)) as harness:
        harness.run("hi", session_id="t1")
        tail = harness.client._stderr_lines if client.name == "published" else harness.client.stderr_tail
        until(lambda: "x" in tail)
    assert "x\n" not in client.wire.lines
    client.wire.frames()


def test_bash_output_stays_inside_tool_result(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    call = {"tool_calls": [{"name": "bash", "arguments": {"description": "Print hi", "command": "echo hi"}}]}
    model = mock([call, {"text": "done"}])
    with client.harness(model.base_url) as harness:
        result = harness.run("run it", session_id="t1")
    tool_result = next(e for e in result.events if e["type"] == "tool/result")
    assert "hi" in tool_result["data"]["message"]["content"][0]["text"]
    assert result.final_response == "done"
    assert all(line.strip() != "hi" for line in client.wire.lines)
    client.wire.frames()


def test_inline_image_needs_a_model_with_image_input(client: ClientKind) -> None:
    image = [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]
    with client.harness() as harness, rejected(client, 'Model "deepseek-v4-flash" does not support image input.'):
        harness.run(image, session_id="i1")


def test_unstorable_session_ids_are_refused_before_anything_is_created(client: ClientKind, home: Path) -> None:
    with client.harness() as harness:
        with rejected(client, "session/prompt session id contains the control character U+000A at index 1"):
            harness.run("hi", session_id="a\nb")
        with rejected(client, "session/prompt session id contains a lone surrogate U+D800 at index 1"):
            harness.run("hi", session_id="a\ud800")
        too_long = "session/prompt session id is too long: its directory name would be 300 bytes, more than 255"
        with rejected(client, too_long):
            harness.run("hi", session_id="s" * 300)
        with rejected(client, "session/resume session id contains the control character U+0009 at index 0"):
            harness.resume_session("\tt1")
    assert not (home / "sessions").exists() or not any((home / "sessions").rglob("*"))
    assert not client.wire.notifications()


# -- raw cases ----------------------------------------------------------------------------------


def test_session_ids_are_checked_by_every_method_that_opens_one(raw: Callable[..., Raw], home: Path) -> None:
    peer = raw()
    peer.initialize()
    blocks = [{"type": "text", "text": "hi"}]
    peer.send(
        b'{"jsonrpc":"2.0","id":"s","method":"session/prompt","params":{"sessionId":"x\\udfff",'
        b'"contentBlocks":[{"type":"text","text":"hi"}]}}\n'
    )
    assert error_of(peer.response("s")) == "session/prompt session id contains a lone surrogate U+DFFF at index 1"
    checks: list[tuple[str, dict[str, Any], str]] = [
        ("session/prompt", {"sessionId": "\x7f", "contentBlocks": blocks}, "contains the control character U+007F"),
        ("session/working-directory/get", {"sessionId": "a\u0085"}, "contains the control character U+0085"),
        ("session/working-directory/set", {"sessionId": "é" * 52, "path": "."}, "would be 260 bytes, more than 255"),
        ("session/resume", {"sessionId": "r" * 256}, "would be 256 bytes, more than 255"),
    ]
    for n, (method, params, problem) in enumerate(checks):
        message = error_of(peer.request(n, method, params))
        label = "working-directory" if method.startswith("session/working") else method
        assert message.startswith(f"{label} session id ") and problem in message, message
    assert not (home / "sessions").exists() or not any((home / "sessions").rglob("*"))
    assert not [f for f in peer.frames() if "method" in f]
    for session_id in ("é" * 51, "w" * 255):
        assert peer.request(session_id, "session/working-directory/get", {"sessionId": session_id})["result"]
    assert error_of(peer.request("w", "session/wait", {"sessionId": "a\nb"})) == "unknown SDK session: a\nb"
    assert peer.request("bye", "shutdown") == {"jsonrpc": "2.0", "id": "bye", "result": {}}
    assert peer.wait() == 0
    assert [len(log.parent.name) for log in (home / "sessions").glob("*/*/session.v4.jsonl.zstd")] == [255, 255]


def test_prompt_before_initialize_then_initialize_works(raw: Callable[..., Raw]) -> None:
    peer = raw()
    params = {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]}
    assert error_of(peer.request("p", "session/prompt", params)) == "SDK server is not initialized"
    assert peer.proc.poll() is None
    assert "serverInfo" in peer.initialize()["result"]


def test_same_session_prompts_are_admitted_in_order(raw: Callable[..., Raw], mock: Callable[..., ThreadedMock]) -> None:
    model = mock([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    peer = raw(model.base_url)
    peer.initialize()

    def prompt(rid: str, sid: str, text: str) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": sid, "contentBlocks": [{"type": "text", "text": text}]},
        }

    peer.send(prompt("a", "t1", "first"), prompt("b", "t1", "second"), prompt("c", "t2", "other"))
    ids = [peer.response(rid)["result"]["messageId"] for rid in ("a", "b")]
    assert len(set(ids)) == 2
    peer.response("c")

    def settled(frames: list[dict[str, Any]]) -> bool:
        ends = [f for f in frames if is_event("t1", "turn/end")(f)]
        return (
            len(ends) == 2
            and any(is_status("t1", "idle")(f) for f in frames)
            and any(is_status("t2", "idle")(f) for f in frames)
        )

    peer.wait_for(settled)
    frames = peer.frames()
    check_ordering(frames)
    receipts = [
        f["params"]["event"]["data"]["inserted"][0]["id"]
        for f in frames
        if is_event("t1", "agent/inbox/spliced")(f) and f["params"]["event"]["data"]["inserted"]
    ]
    assert receipts == ids
    statuses = [
        f["params"]["status"]
        for f in frames
        if f.get("method") == "session.status" and f["params"]["sessionId"] == "t1"
    ]
    assert statuses == ["running", "idle"]
    assert len([f for f in frames if is_event("t2", "turn/end")(f)]) == 1


def test_unknown_methods(raw: Callable[..., Raw]) -> None:
    peer = raw()
    for method in ("session/cancel", "session/list", "session/close", "initialized", "$/cancelRequest", "bogus"):
        frame = peer.request(method, method, {})
        assert error_of(frame) == f"unknown DeepSeek Harness SDK runtime method: {method}"
    assert peer.proc.poll() is None


def test_garbage_non_objects_and_notifications_get_no_reply(raw: Callable[..., Raw], home: Path) -> None:
    peer = raw()
    peer.initialize()
    prompt = {
        "jsonrpc": "2.0",
        "method": "session/prompt",
        "params": {"sessionId": "ghost", "contentBlocks": [{"type": "text", "text": "hi"}]},
    }
    peer.send(
        b"this is not json\n",
        b"[1,2]\n",
        b"NaN\n",
        prompt,
        b"\r\n\n",
        {"jsonrpc": "2.0", "id": True, "method": "session/prompt"},
        {"jsonrpc": "2.0", "id": "r", "result": {}},
    )
    frame = peer.request("q", "session/prompt", [1])
    assert error_of(frame) == "session/prompt requires a non-empty sessionId string"
    assert len(peer.frames()) == 2
    assert not list((home / "sessions").rglob("ghost"))
    assert peer.request(" spaced ", "bogus")["id"] == " spaced "


def test_ids_are_echoed_with_their_type(raw: Callable[..., Raw]) -> None:
    peer = raw()
    peer.send(b'{"jsonrpc":"2.0","id":7,"method":"bogus"}\r\n')
    assert b'"id":7,' in peer.wait_for(lambda frames: peer.lines)[0]
    assert peer.request("7", "bogus")["id"] == "7"


def test_ids_json_cannot_echo_are_ignored_and_serving_continues(raw: Callable[..., Raw]) -> None:
    peer = raw()
    peer.send(
        b'{"jsonrpc":"2.0","id":1e400,"method":"bogus"}\n',
        b'{"jsonrpc":"2.0","id":-1e400,"method":"session/prompt","params":{}}\n',
        b'{"jsonrpc":"2.0","id":NaN,"method":"bogus"}\n',
        b'{"jsonrpc":"2.0","id":-Infinity,"method":"bogus"}\n',
    )
    assert peer.request(1e-400, "bogus")["id"] == 0
    assert error_of(peer.request("after", "bogus")) == "unknown DeepSeek Harness SDK runtime method: bogus"
    assert len(peer.frames()) == 2
    peer.close_stdin()
    assert peer.wait() == 0
    stderr = b"".join(peer.stderr).decode()
    assert stderr.count("ignored a request whose id JSON cannot carry back") == 2, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr


def test_params_validation_messages_and_order(raw: Callable[..., Raw]) -> None:
    peer = raw()
    checks: list[tuple[str, Any, str]] = [
        ("session/resume", {}, "session/resume requires a non-empty sessionId string"),
        ("session/resume", {"sessionId": "x"}, "SDK server is not initialized"),
        ("session/wait", {"sessionId": None}, "session/wait requires a sessionId string"),
        ("session/wait", {"sessionId": ""}, "SDK server is not initialized"),
        ("session/working-directory/get", {}, "working-directory requests require a non-empty sessionId"),
        ("session/working-directory/set", {"sessionId": "x"}, "working-directory set requires a path string"),
        ("session/working-directory/set", {"sessionId": "x", "path": "."}, "SDK server is not initialized"),
        ("session/prompt", {}, "SDK server is not initialized"),
        ("initialize", {"reasoningEffort": 3, "maxTokens": 0}, "initialize reasoningEffort must be a non-empty string"),
        ("initialize", {"maxTokens": "8"}, "initialize maxTokens must be a positive safe integer"),
        ("initialize", {"maxTokens": 2**53}, "initialize maxTokens must be a positive safe integer"),
        ("initialize", {"maxTokens": -1}, "initialize maxTokens must be a positive safe integer"),
        ("initialize", {"provider": "p", "model": "m"}, "initialize cwd must be a string"),
        ("initialize", {"cwd": ".", "model": "m"}, "initialize provider must be a non-empty string"),
        ("initialize", {"cwd": ".", "provider": "p", "model": ""}, "initialize model must be a non-empty string"),
    ]
    for n, (method, params, message) in enumerate(checks):
        assert error_of(peer.request(n, method, params)) == message, (method, params)
    peer.initialize()
    prompts: list[tuple[Any, str]] = [
        ({"sessionId": ""}, "session/prompt requires a non-empty sessionId string"),
        ({"sessionId": "s"}, "session/prompt requires a non-empty contentBlocks array"),
        ({"sessionId": "s", "contentBlocks": []}, "session/prompt requires a non-empty contentBlocks array"),
        ({"sessionId": "s", "contentBlocks": ["hi"]}, "session/prompt requires a non-empty contentBlocks array"),
        (
            {"sessionId": "s", "contentBlocks": [{"type": "text", "text": "a"}, {"type": "video"}]},
            "session/prompt content block 1 is invalid",
        ),
        ({"sessionId": "s", "contentBlocks": [{"type": "text"}]}, "session/prompt content block 0 is invalid"),
    ]
    for n, (params, message) in enumerate(prompts):
        assert error_of(peer.request(f"p{n}", "session/prompt", params)) == message, params


def test_reinitialize_replaces_defaults_only_on_success(raw: Callable[..., Raw], ws: Path) -> None:
    for name in ("a", "b"):
        (ws / name).mkdir()
    peer = raw()

    def cwd_of(sid: str) -> str:
        result: str = peer.request(f"g-{sid}", "session/working-directory/get", {"sessionId": sid})["result"]["cwd"]
        return result

    peer.initialize(cwd="a")
    assert cwd_of("s1") == str(ws / "a")
    assert "error" in peer.request("i2", "initialize", {"cwd": str(ws / "b"), "provider": "nope", "model": "m"})
    assert cwd_of("s2") == str(ws / "a")
    peer.initialize(cwd=str(ws / "b"))
    assert cwd_of("s3") == str(ws / "b")
    assert cwd_of("s1") == str(ws / "a")


def test_max_tokens_float_integral_reaches_the_provider(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock]
) -> None:
    model = mock([TEXT])
    peer = raw(model.base_url)
    peer.initialize(maxTokens=8.0)
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    header = peer.wait_for(lambda frames: [f for f in frames if is_event("t1", "request/header")(f)])[0]
    assert header["params"]["event"]["data"]["header"]["config"]["maxTokens"] == 8
    peer.wait_for(lambda frames: any(is_status("t1", "idle")(f) for f in frames))
    assert model.requests[0]["body"]["max_tokens"] == 8


def test_deltas_only_after_opt_in(raw: Callable[..., Raw], mock: Callable[..., ThreadedMock]) -> None:
    model = mock([TEXT, TEXT])
    plain = raw(model.base_url)
    assert plain.initialize()["result"]["pydsh"]["extensions"] == []
    plain.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    plain.wait_for(lambda frames: any(is_status("t1", "idle")(f) for f in frames))
    methods = {f["method"] for f in plain.frames() if "method" in f}
    assert methods == {"session.event", "session.status"}

    opted = raw(model.base_url)
    assert opted.initialize(pydshExtensions={"deltas": True})["result"]["pydsh"]["extensions"] == ["deltas"]
    opted.request("p", "session/prompt", {"sessionId": "t2", "contentBlocks": [{"type": "text", "text": "hi"}]})
    opted.wait_for(lambda frames: any(is_status("t2", "idle")(f) for f in frames))
    frames = opted.frames()
    deltas = [f for f in frames if f.get("method") == "pydsh.session.delta"]
    assert "".join(d["params"]["delta"] for d in deltas) == "Hello there."
    assert set(deltas[0]["params"]) == {"sessionId", "turn", "step", "index", "blockType", "delta"}
    assert frames.index(deltas[-1]) < index_of(frames, is_event("t2", "assistant/message"))


def test_lone_surrogates_in_a_prompt_enter_the_log_as_replacement_characters(raw: Callable[..., Raw]) -> None:
    """Decided once where text enters (decision 0017): the log, and so the echoed event, holds U+FFFD; the
    frame encoder's ``\\udXXX`` escapes (spec 06 §4) stay for any other string (``test_protocol``)."""
    peer = raw()
    peer.initialize()
    peer.send(
        b'{"jsonrpc":"2.0","id":"s","method":"session/prompt","params":{"sessionId":"u",'
        b'"contentBlocks":[{"type":"text","text":"a\\ud800b"}]}}\n'
    )
    peer.response("s")
    receipt = next(line for line in peer.lines if b'"agent/inbox/spliced"' in line)
    assert '"text":"a\ufffdb"' in receipt.decode("utf-8")


def test_overlong_line_is_discarded_and_serving_continues(raw: Callable[..., Raw]) -> None:
    peer = raw()
    peer.send(b"x" * (64 * 1024 * 1024 + 1) + b"\n")
    assert error_of(peer.request("after", "bogus")) == "unknown DeepSeek Harness SDK runtime method: bogus"
    assert len(peer.frames()) == 1
    peer.close_stdin()
    assert peer.wait() == 0
    assert b"discarded an inbound line" in b"".join(peer.stderr)


def test_stdin_eof_exits_zero(raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], home: Path) -> None:
    model = mock([TEXT])
    peer = raw(model.base_url)
    peer.initialize()
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    peer.wait_for(lambda frames: any(is_status("t1", "idle")(f) for f in frames))
    peer.close_stdin()
    assert peer.wait() == 0
    assert stored_events(home, "t1")[-1]["type"] == "turn/end"


def test_shutdown_rejects_later_work_and_is_the_last_frame(raw: Callable[..., Raw]) -> None:
    peer = raw()
    peer.initialize()
    shutdown = {"jsonrpc": "2.0", "id": "bye", "method": "shutdown", "params": {"ignored": True}}
    later = {
        "jsonrpc": "2.0",
        "id": "late",
        "method": "session/prompt",
        "params": {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]},
    }
    peer.send(shutdown, later)
    assert error_of(peer.response("late")) == "SDK server is shutting down"
    assert peer.wait() == 0
    frames = peer.frames()
    assert frames[-1] == {"jsonrpc": "2.0", "id": "bye", "result": {}}


def test_shutdown_is_answered_after_a_failed_initialize(raw: Callable[..., Raw]) -> None:
    peer = raw()
    assert error_of(peer.initialize(provider="nope")) == 'no adapter registered for provider "nope"'
    assert peer.request("bye", "shutdown") == {"jsonrpc": "2.0", "id": "bye", "result": {}}
    assert peer.wait() == 0


def test_turn_running_at_shutdown_ends_aborted(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], home: Path
) -> None:
    model = mock(["stall"])
    peer = raw(model.base_url)
    peer.initialize()
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    until(lambda: model.requests)
    assert peer.request("bye", "shutdown") == {"jsonrpc": "2.0", "id": "bye", "result": {}}
    assert peer.wait() == 0
    end = stored_events(home, "t1")[-1]
    assert end["type"] == "turn/end"
    assert end["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "disposed"}}
    assert peer.frames()[-1]["id"] == "bye"


def test_sigterm_tears_down_and_exits_zero(raw: Callable[..., Raw]) -> None:
    peer = raw()
    peer.initialize()
    peer.request("g", "session/working-directory/get", {"sessionId": "w"})
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.wait() == 0


def test_broken_stdout_is_treated_as_eof(ws: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pydsh.sdk"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None and proc.stdin is not None
    proc.stdout.close()
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"cwd": str(ws), "provider": "deepseek-official", "model": "deepseek-v4-flash"},
    }
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    assert proc.wait(SAFETY_S) == 0


def test_agent_disposed_outside_the_server(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], tmp_path: Path
) -> None:
    patch = write_patch(tmp_path / "d.yml", [{"insert": [{"id": "disposer", "name": "tests.sdk.plugins:disposer"}]}])
    model = mock([])
    peer = raw(model.base_url, ("--patch", str(patch)))
    peer.initialize()
    peer.request("p", "session/prompt", {"sessionId": "d1", "contentBlocks": [{"type": "text", "text": "[[dispose]]"}]})
    peer.wait_for(lambda frames: b"disposed d1\n" in peer.stderr)
    again = peer.request("q", "session/prompt", {"sessionId": "d1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    assert error_of(again) == "session agent was disposed outside the server: d1"
    cwd = peer.request("g", "session/working-directory/get", {"sessionId": "d1"})
    assert error_of(cwd) == "session agent was disposed outside the server: d1"


# -- launcher grammar ---------------------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(args, input="", capture_output=True, text=True, env=full_env, timeout=SAFETY_S, check=False)


def test_help_too_many_arguments_and_invalid_env() -> None:
    shown = run_cli(PYDSH, "--profile", "sdk", "--help")
    assert (shown.returncode, shown.stdout) == (0, HELP)
    extra = run_cli(sys.executable, "-m", "pydsh.sdk", "serve")
    assert (extra.returncode, extra.stdout) == (1, "")
    assert "error: too many arguments" in extra.stderr
    invalid = run_cli(PYDSH, "sdk", env={"DSH_MAX_TOKENS_AS_SUCCESS": "maybe"})
    assert (invalid.returncode, invalid.stdout) == (2, "")
    for value in ("TRUE", "False"):
        accepted = run_cli(PYDSH, "sdk", env={"DSH_MAX_TOKENS_AS_SUCCESS": value})
        assert (accepted.returncode, accepted.stdout) == (0, "")


def test_missing_patch_is_a_composition_error(tmp_path: Path) -> None:
    missing = run_cli(sys.executable, "-m", "pydsh.sdk", "--patch", str(tmp_path / "nope.yml"))
    assert (missing.returncode, missing.stdout) == (2, "")


def test_initialize_activates_the_builtin_deepseek_adapter(
    raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], tmp_path: Path
) -> None:
    patch = write_patch(tmp_path / "off.yml", [{"id": "llm-deepseek", "disabled": True}])
    model = mock([TEXT])
    peer = raw(model.base_url, ("--patch", str(patch)))
    assert "serverInfo" in peer.initialize()["result"]
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]})
    peer.wait_for(lambda frames: any(is_status("t1", "idle")(f) for f in frames))
    assert any(is_event("t1", "assistant/message")(f) for f in peer.frames())
    assert peer.request("bye", "shutdown") == {"jsonrpc": "2.0", "id": "bye", "result": {}}
    assert peer.wait() == 0


def test_signal_teardown_is_bounded(raw: Callable[..., Raw], mock: Callable[..., ThreadedMock], tmp_path: Path) -> None:
    patch = write_patch(
        tmp_path / "s.yml", [{"insert": [{"id": "stubborn", "name": "tests.sdk.plugins:stubborn_tool"}]}]
    )
    model = mock([{"tool_calls": [{"name": "stubborn", "arguments": {}}]}])
    peer = raw(model.base_url, ("--patch", str(patch)))
    peer.initialize()
    peer.request("p", "session/prompt", {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "go"}]})
    until(lambda: b"stubborn: started\n" in peer.stderr)
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.wait() == 1
    assert any(b"teardown exceeded 5 s; unfinished: session t1" in line for line in peer.stderr)
