"""Our client (spec 06 §14): configuration, the async API against pydsh, errors, the blocking facade."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pydsh.sdk.client import (
    AsyncHarness,
    AsyncJsonRpcClient,
    Harness,
    HarnessConfig,
    JsonRpcError,
    Notification,
    SdkProtocolError,
    TransportClosedError,
    _launch,
)
from pydsh.testing.mock_model_server import MockModelServer
from tests.sdk.conftest import REPO, SAFETY_S, Wire, hold_until_idle

SUBAGENT_CALL = {"tool_calls": [{"name": "subagent", "arguments": {"description": "say hi", "prompt": "Say hi"}}]}


def harness(server: MockModelServer | None, ws: Path, **options: Any) -> AsyncHarness:
    """A harness on ``pydsh``; close waits up to the safety bound for the exit (its speed is bench/sdk.py's)."""
    base: dict[str, Any] = {
        "cwd": ws,
        "dsh_home": os.environ["DSH_HOME"],
        "api_key": "sk-test",
        "shutdown_timeout": SAFETY_S,
    }
    if server is not None:
        base["base_url"] = server.base_url
    return AsyncHarness(**base, **options)


def fake(ws: Path, mode: str, **options: Any) -> AsyncHarness:
    args = (sys.executable, "-m", "tests.sdk.fake_runtime", mode)
    return AsyncHarness(cwd=ws, launch_args=args, env={"PYTHONPATH": str(REPO)}, **options)


# -- configuration -----------------------------------------------------------------------------


def test_config_and_keywords_are_exclusive() -> None:
    with pytest.raises(TypeError):
        AsyncHarness(HarnessConfig(), model="m")
    with pytest.raises(TypeError):
        AsyncHarness(no_such_option=1)


def test_launch_argv_env_and_cwds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = HarnessConfig(
        patches=("a.yml",),
        dsh_home="home",
        base_url="http://127.0.0.1:9",
        api_key="k",
        env={"EXTRA": "1"},
        runtime_cwd="run",
    )
    argv, env, runtime_cwd, cwd = _launch(config)
    assert argv == [sys.executable, "-m", "pydsh", "--profile", "sdk", "--patch", str(tmp_path / "a.yml")]
    assert env["DSH_HOME"] == str(tmp_path / "home")
    assert (env["DEEPSEEK_BASE_URL"], env["DEEPSEEK_API_KEY"], env["EXTRA"]) == ("http://127.0.0.1:9", "k", "1")
    assert (runtime_cwd, cwd) == (str(tmp_path / "run"), str(tmp_path))
    bin_argv, *_ = _launch(HarnessConfig(dsh_bin="bin/dsh", profile="sdk-minimal"))
    assert bin_argv == [str(tmp_path / "bin/dsh"), "--profile", "sdk-minimal"]
    verbatim, *_ = _launch(HarnessConfig(launch_args=("x", "y"), patches=("ignored",)))
    assert verbatim == ["x", "y"]


async def test_blank_home_fails_before_spawning(ws: Path) -> None:
    h = AsyncHarness(cwd=ws, dsh_home="  ")
    with pytest.raises(ValueError, match="non-empty dsh_home"):
        await h.start()
    assert h.client.proc is None


def test_default_session_ids() -> None:
    session = AsyncHarness().session()
    assert session.id.startswith("session-") and len(session.id) == len("session-") + 32
    assert AsyncHarness().session("mine").id == "mine"


# -- runs against pydsh ------------------------------------------------------------------------


async def test_run_callbacks_and_result(ws: Path) -> None:
    seen: list[tuple[str, Any]] = []

    async def on_status(status: str) -> None:
        await asyncio.sleep(0)
        seen.append(("status", status))

    async with MockModelServer(sequence=[{"text": "Hello there."}]) as server, harness(server, ws) as h:
        assert h.server_info == {"name": "deepseek-harness-sdk-runtime", "version": "0.0.1"}
        assert h.extensions == ()
        result = await h.run(
            "hi",
            session_id="t1",
            on_event=lambda e: seen.append(("event", e["type"])),
            on_status=on_status,
            on_notification=lambda n: seen.append(("note", n.method)),
            on_text=lambda t: seen.append(("text", t)),
        )
    assert result.session_id == "t1"
    assert result.events[0]["data"]["inserted"][0]["id"] == result.message_id
    assert (result.final_response, result.finish_reason, result.child_session_ids) == ("Hello there.", "completed", ())
    assert seen[:3] == [("note", "session.event"), ("event", "agent/inbox/spliced"), ("note", "session.status")]
    assert ("status", "running") in seen and seen[-1] == ("status", "idle")
    assert ("text", "Hello there.") in seen
    assert len([s for s in seen if s[0] == "note"]) == len(result.notifications)
    assert all(isinstance(n, Notification) for n in result.notifications)
    assert h.client.proc is not None and h.client.proc.returncode == 0


async def test_stream_yields_frames_and_sets_the_result(ws: Path) -> None:
    async with MockModelServer(sequence=[{"text": "one"}, {"text": "two"}]) as server, harness(server, ws) as h:
        session = h.session("s")
        stream = session.stream("hi")
        methods = [note.method async for note in stream]
        assert stream.result is not None and stream.result.final_response == "one"
        assert methods[-1] == "session.status" and len(methods) == len(stream.result.notifications)
        early = session.stream("again")
        async with early:
            first = await anext(early)
            assert first.payload["event"]["type"] == "agent/inbox/spliced"
        assert not h.client._subscriptions
        assert early.result is None
        await session.wait()


async def test_callback_error_propagates_and_unsubscribes(ws: Path) -> None:
    def boom(note: Notification) -> None:
        raise RuntimeError("callback failed")

    async with MockModelServer(sequence=[{"text": "x"}]) as server, harness(server, ws) as h:
        with pytest.raises(RuntimeError, match="callback failed"):
            await h.run("hi", session_id="c", on_notification=boom)
        assert not h.client._subscriptions


async def test_deltas_feed_on_text_when_opted_in(ws: Path) -> None:
    texts: list[str] = []
    server = MockModelServer(sequence=[{"text": "Hello there."}])
    async with server, harness(server, ws, stream_deltas=True) as h:
        assert h.extensions == ("deltas",)
        result = await h.run("hi", on_text=texts.append)
    assert len(texts) > 1 and "".join(texts) == "Hello there."
    assert any(n.method == "pydsh.session.delta" for n in result.notifications)


async def test_wait_children_collects_the_settlement(ws: Path, wire: Wire) -> None:
    sequence = [SUBAGENT_CALL, {"text": "same"}, {"text": "same"}, {"text": "root done"}]
    hold = hold_until_idle(wire.frames, "t1", "Say hi")
    async with MockModelServer(sequence=sequence, hold=hold) as server, harness(server, ws) as h:
        result = await h.run("delegate", session_id="t1", wait_children=True)
    methods = [n.method for n in result.notifications]
    assert "subagent.finished" in methods
    assert len(result.child_session_ids) == 1
    assert result.final_response == "root done"
    turns = [e["data"]["turn"] for e in result.events if e["type"] == "turn/start"]
    assert turns == [1, 2]


async def test_unclaimed_working_directory_resume_and_wait(ws: Path) -> None:
    (ws / "sub").mkdir()
    async with MockModelServer(sequence=[{"text": "a"}]) as server:
        async with harness(server, ws) as h:
            session = h.session("w")
            assert await session.get_working_directory() == str(ws)
            assert await session.set_working_directory(ws / "sub") == str(ws / "sub")
            unclaimed = h.unclaimed()
            types = [(await anext(unclaimed)).payload["event"]["type"] for _ in range(5)]
            assert types == [
                "permission/preset",
                "sandbox/mode",
                "approval/policy",
                "working-directory/change",
                "agent/inbox/spliced",
            ]
            await session.run("go")
            await session.wait()
            message_id = await session.prompt("queued")
            assert isinstance(message_id, str)
        async with harness(server, ws) as again:
            resumed = await again.resume_session("w")
            assert await resumed.get_working_directory() == str(ws / "sub")
            with pytest.raises(JsonRpcError) as caught:
                await again.resume_session("w")
            assert (caught.value.code, caught.value.message) == (-32603, "SDK session is already open or opening: w")


async def test_run_timeout_names_the_session(ws: Path) -> None:
    async with MockModelServer(sequence=["stall"]) as server, harness(server, ws) as h:
        with pytest.raises(TimeoutError, match="run on session slow timed out"):
            await h.run("hi", session_id="slow", timeout=0.5)


async def test_close_is_idempotent_and_final(ws: Path) -> None:
    h = harness(None, ws)
    await h.start()
    await h.start()
    await h.close()
    await h.close()
    assert h.client.proc is not None and h.client.proc.returncode == 0
    with pytest.raises(TransportClosedError):
        await h.start()


# -- errors ------------------------------------------------------------------------------------


async def test_initialize_error_carries_the_stderr_tail_and_closes(ws: Path) -> None:
    h = fake(ws, "error")
    with pytest.raises(JsonRpcError) as caught:
        await h.start()
    assert caught.value.code == -32603
    assert caught.value.message.startswith("no thanks\n")
    assert "fake: refusing to start" in caught.value.message
    assert h.client.proc is not None and h.client.proc.returncode == 0


async def test_process_exit_is_a_transport_error(ws: Path) -> None:
    h = fake(ws, "exit")
    with pytest.raises(TransportClosedError) as caught:
        await h.start()
    assert "exit code: 3" in str(caught.value)
    assert "fake: boom" in str(caught.value)


async def test_initialize_timeout_names_the_profile(ws: Path) -> None:
    h = fake(ws, "silent", initialize_timeout=0.3, shutdown_timeout=0.2)
    with pytest.raises(TimeoutError, match="initialize timed out") as caught:
        await h.start()
    assert "selected dsh profile 'sdk'" in str(caught.value)
    assert h.client.proc is not None and h.client.proc.returncode is not None


async def test_protocol_errors(ws: Path) -> None:
    array = fake(ws, "array")
    with pytest.raises(SdkProtocolError, match="initialize response must be a JSON object"):
        await array.start()
    async with fake(ws, "message-id") as numeric:
        with pytest.raises(SdkProtocolError, match="session/prompt response is invalid"):
            await numeric.session("s").prompt("hi")
    async with fake(ws, "turn-end") as kind:
        with pytest.raises(SdkProtocolError, match=r"turn/end event requires a string data\.reason\.kind"):
            await kind.run("hi", session_id="s")


# -- blocking facade and process ownership -----------------------------------------------------


def test_blocking_facade(ws: Path) -> None:
    with Harness(cwd=ws, dsh_home=os.environ["DSH_HOME"]) as h:
        session = h.session("b")
        assert session.get_working_directory() == str(ws)
        assert h.server_info is not None
        proc = h.client.proc
    assert proc is not None and proc.returncode == 0


async def test_blocking_facade_refuses_a_running_loop(ws: Path) -> None:
    h = Harness(cwd=ws, dsh_home=os.environ["DSH_HOME"])
    with pytest.raises(RuntimeError, match="use AsyncHarness"):
        h.start()
    await asyncio.to_thread(h.close)


def test_an_unclosed_harness_leaves_no_process(ws: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from pydsh.sdk.client import AsyncHarness\n"
        "async def main():\n"
        f"    h = AsyncHarness(cwd={str(ws)!r})\n"
        "    await h.start()\n"
        "    print(h.client.proc.pid, flush=True)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=SAFETY_S, check=True)
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + SAFETY_S
    while _alive(pid):
        assert time.monotonic() < deadline, "the runtime outlived its client"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


def test_notifications_keep_non_object_params_empty(ws: Path) -> None:
    client = AsyncHarness().client
    client._dispatch({"jsonrpc": "2.0", "method": "session.status", "params": [1]})
    note = client.unclaimed.get_nowait()
    assert note == Notification("session.status", {})
    client._dispatch(json.loads('{"jsonrpc":"2.0","id":"x","method":"server/request"}'))
    assert client.unclaimed.empty()


def note(method: str, **payload: Any) -> Notification:
    return Notification(method, payload)


async def test_a_tree_subscription_gets_its_sessions_and_descendants_and_nothing_else() -> None:
    client = AsyncJsonRpcClient()
    root, other = client.subscribe_tree("root"), client.subscribe_tree("other")
    everything = client.subscribe()
    frames = [
        note("session.event", sessionId="root"),
        note("subagent.started", parentSessionId="root", childSessionId="child"),
        note("subagent.started", parentSessionId="child", childSessionId="grandchild"),
        note("session.event", sessionId="grandchild"),
        note("session.event", sessionId="stranger"),
        note("subagent.finished", parentSessionId="stranger", childSessionId="root"),
    ]
    for frame in frames:
        client._deliver(frame)
    got = []
    while (item := root.next_nowait()) is not None:
        got.append(item)
    assert got == [frames[0], frames[1], frames[2], frames[3], frames[5]]
    assert other.next_nowait() is None
    assert [everything.next_nowait() for _ in frames] == frames
    assert client.unclaimed.empty(), "the catch-all subscription claimed every frame"
    everything.close()
    client._deliver(frames[4])
    assert client.unclaimed.get_nowait() is frames[4]
    root.close()
    other.close()
    assert not client._subscriptions


async def test_the_tree_filter_follows_the_same_rule_as_the_routing() -> None:
    client = AsyncJsonRpcClient()
    client._deliver(note("subagent.started", parentSessionId="root", childSessionId="child"))
    belongs = client.tree_filter("root")
    assert belongs(note("session.event", sessionId="child"))
    assert belongs(note("subagent.finished", parentSessionId="stranger", childSessionId="root"))
    assert not belongs(note("session.event", sessionId="stranger"))
    assert not belongs(note("session.event"))
