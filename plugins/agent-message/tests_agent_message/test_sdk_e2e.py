"""End to end: sessions of one ``pydsh --profile sdk`` process, opened by the published SDK client. Two exchange a
message and a reply (the sender's receipts go ``pending`` → ``claimed`` → ``answered``); three fan out one to two."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pydsh.testing import scripted_patch

from .world import HERE, PLUGIN, new_id, relay_text, tool

deepseek_harness = pytest.importorskip("deepseek_harness")

PLUGIN_DIR = Path(__file__).resolve().parents[1]
REPO = PLUGIN_DIR.parents[1]
PYDSH = str(Path(sys.executable).parent / "pydsh")
MESSAGE_ID = "{{fromRequest:as message ([0-9a-f-]{36})}}"
RECEIVED_ID = "{{fromRequest:dsh-agent-message\\nrelay\\n[^\\n]*\\n[^\\n]*\\n[^\\n]*\\nuser\\n([0-9a-f-]{36})}}"


def metas_of(result: Any, name: str) -> list[dict[str, Any]]:
    """The presentation metas of the run's ``name`` tool results, in log order."""
    calls = {e["data"]["callId"] for e in result.events if e["type"] == "tool/call" and e["data"]["name"] == name}
    results = [e for e in result.events if e["type"] == "tool/result" and e["data"]["message"]["toolCallId"] in calls]
    return [e["data"]["meta"] for e in results]


def meta_of(result: Any, name: str) -> dict[str, Any]:
    """The presentation meta of the run's (last) ``name`` tool result."""
    return metas_of(result, name)[-1]


def turn_user_message(events: list[dict[str, Any]], turn: int) -> dict[str, Any]:
    """The first user message of ``turn`` among ``events``."""
    start = next(i for i, e in enumerate(events) if e["type"] == "turn/start" and e["data"]["turn"] == turn)
    return next(e for e in events[start:] if e["type"] == "user/message")


def sdk_harness(tmp_path: Path, scripts: list[list[Any]], rows: list[dict[str, Any]]) -> Any:
    """A published-client harness over ``pydsh --profile sdk`` with scripted models and ``rows`` patched in."""
    patch = tmp_path / "patch.yml"
    patch.write_text(json.dumps([*scripted_patch(scripts), {"insert": rows}]))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(PLUGIN_DIR)])}
    return deepseek_harness.DeepSeekHarness(
        dsh_bin=PYDSH,
        dsh_home=str(tmp_path / "home"),
        cwd=str(workspace),
        api_key="sk-test",
        env=env,
        patches=(str(patch),),
    )


def wait_for(subscription: Any, session_id: str, predicate: Any) -> list[dict[str, Any]]:
    """``session_id``'s events read from its notifications up to the first that satisfies ``predicate``."""
    events: list[dict[str, Any]] = []
    while True:
        note = subscription.next()
        if note.method == "session.event" and note.payload.get("sessionId") == session_id:
            events.append(note.payload["event"])
            if predicate(events[-1]):
                return events


def test_two_sdk_sessions_message_claim_and_answer(tmp_path: Path) -> None:
    a, b = new_id(), new_id()
    ready, release = tmp_path / "ready", tmp_path / "release"
    b_script = [
        tool("wait_file", ready=str(ready), release=str(release)),
        {"text": "worked"},
        {"text": "got ping"},
        tool("send_agent_message", to=a, content="pong", reply_to=RECEIVED_ID),
        {"text": "replied"},
    ]
    a_script = [
        tool("send_agent_message", to=b, content="ping"),
        {"text": "sent"},
        tool("check_delivery", to=b, messageId=MESSAGE_ID),
        {"text": "pending"},
        tool("check_delivery", to=b, messageId=MESSAGE_ID),
        {"text": "claimed"},
        {"text": "thanks"},
        tool("check_delivery", to=b, messageId=MESSAGE_ID),
        {"text": "answered"},
    ]
    rows = [
        {"id": "agent-message", "name": PLUGIN},
        {"id": "agent-message-file-gate", "name": f"{HERE}:file_gate_plugin"},
    ]
    with sdk_harness(tmp_path, [b_script, a_script], rows) as harness:
        session_a, session_b = harness.start_session(a), harness.start_session(b)
        b_first: list[Any] = []
        worker = threading.Thread(target=lambda: b_first.append(session_b.run("work")))
        worker.start()
        while not ready.exists():
            worker.join(0.01)
        sent = meta_of(session_a.run("tell B ping"), "send_agent_message")
        assert sent["state"] == "accepted" and sent["targetRuntimeStatus"] == "running"
        message_id = sent["messageId"]
        pending = meta_of(session_a.run("check"), "check_delivery")["entries"]
        assert [(e["messageId"], e["state"]) for e in pending] == [(message_id, "pending")]
        with harness.client.subscribe_session_notifications(b) as b_notes:
            release.write_text("go")
            worker.join()
            events = wait_for(b_notes, b, lambda e: e["type"] == "turn/end" and e["data"]["turn"] == 2)
        user = turn_user_message(events, 2)
        assert user["data"]["id"] == message_id
        assert user["data"]["content"] == relay_text(a, "ping")
        assert user["data"]["source"]["senderSessionId"] == a and user["data"]["source"]["form"] == "relay"
        claimed = meta_of(session_a.run("check"), "check_delivery")["entries"]
        assert [(e["messageId"], e["state"]) for e in claimed] == [(message_id, "claimed")]
        with harness.client.subscribe_session_notifications(a) as a_notes:
            reply = meta_of(session_b.run("answer A"), "send_agent_message")
            wait_for(a_notes, a, lambda e: e["type"] == "turn/end")
        answered = meta_of(session_a.run("check"), "check_delivery")["entries"]
        assert answered[0]["state"] == "answered" and answered[0]["replyMessageId"] == reply["messageId"]


def test_three_sdk_sessions_list_fan_out_and_claim(tmp_path: Path) -> None:
    a, b, c = new_id(), new_id(), new_id()
    a_script = [
        tool("list_peer_agents"),
        tool("send_agent_message", to=b, content="hello B"),
        tool("send_agent_message", to=c, content="hello C"),
        {"text": "sent"},
        {"tool_calls": [{"name": "check_delivery", "arguments": {"to": t}} for t in (b, c)]},
        {"text": "claimed"},
    ]
    peer_script = [{"text": "ready"}, {"text": "got it"}]
    rows = [{"id": "agent-message", "name": PLUGIN}]
    with sdk_harness(tmp_path, [peer_script, peer_script, a_script], rows) as harness:
        session_a, session_b, session_c = (harness.start_session(s) for s in (a, b, c))
        session_b.run("B starts")
        session_c.run("C starts")
        with (
            harness.client.subscribe_session_notifications(b) as b_notes,
            harness.client.subscribe_session_notifications(c) as c_notes,
        ):
            fan_out = session_a.run("tell B and C hello")
            turn_end = lambda e: e["type"] == "turn/end"  # noqa: E731
            received = {b: wait_for(b_notes, b, turn_end), c: wait_for(c_notes, c, turn_end)}
        peers = meta_of(fan_out, "list_peer_agents")
        assert sorted((r["id"], r["self"]) for r in peers) == sorted([(a, True), (b, False), (c, False)])
        sent = {m["to"]: m["messageId"] for m in metas_of(fan_out, "send_agent_message")}
        assert set(sent) == {b, c}
        for target, content in ((b, "hello B"), (c, "hello C")):
            user = turn_user_message(received[target], 2)
            assert user["data"]["id"] == sent[target]
            assert user["data"]["content"] == relay_text(a, content)
        receipts = [m["entries"] for m in metas_of(session_a.run("check"), "check_delivery")]
        assert sorted((e["messageId"], e["state"]) for entries in receipts for e in entries) == sorted(
            (sent[t], "claimed") for t in (b, c)
        )
