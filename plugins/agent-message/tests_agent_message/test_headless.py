"""Headless hosts one session: persisted peers are listed ``offline`` and a send resumes them in-process (09 §4.2)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydsh.session.persistence.jsonl import JsonlPersistence
from pydsh.testing import scripted_patch

from .world import PLUGIN, new_id, relay_text, tool

PLUGIN_DIR = Path(__file__).resolve().parents[1]
REPO = PLUGIN_DIR.parents[1]


def headless(tmp_path: Path, scripts: list[list[Any]], *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pydsh --profile headless`` with scripted models and the plugin patched in."""
    patch = tmp_path / f"patch-{new_id()}.yml"
    patch.write_text(json.dumps([*scripted_patch(scripts), {"insert": [{"id": "agent-message", "name": PLUGIN}]}]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(PLUGIN_DIR)])}
    command = [sys.executable, "-m", "pydsh", "--profile", "headless", "--patch", str(patch), *args]
    return subprocess.run(command, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


async def read_log(session_id: str) -> list[dict[str, Any]]:
    """``session_id``'s persisted log in this test's home."""
    handle = await JsonlPersistence(Path(os.environ["DSH_HOME"]) / "sessions").open(session_id, "read")
    return await handle.read()


def test_headless_lists_a_persisted_peer_offline_and_a_send_resumes_it(tmp_path: Path) -> None:
    a, b = new_id(), new_id()
    first = headless(tmp_path, [[{"text": "B ready"}]], "--session", b, "B starts")
    assert first.returncode == 0, first.stderr
    a_script = [
        tool("list_peer_agents"),
        tool("send_agent_message", to=b, content="hello B"),
        {"text": "sent"},
    ]
    second = headless(tmp_path, [a_script, [{"text": "B got it"}]], "--session", a, "tell B hello")
    assert second.returncode == 0, second.stderr
    a_events = asyncio.run(read_log(a))
    metas = [e["data"]["meta"] for e in a_events if e["type"] == "tool/result"]
    peers = {r["id"]: (r["status"], r["self"]) for r in metas[0]}
    assert peers == {a: ("running", True), b: ("offline", False)}
    message_id = metas[1]["messageId"]
    assert metas[1]["state"] == "accepted"
    b_events = asyncio.run(read_log(b))
    relay = next(e for e in b_events if e["type"] == "user/message" and e["data"]["id"] == message_id)
    assert relay["data"]["content"] == relay_text(a, "hello B")
    after = b_events[b_events.index(relay) :]
    replies = [e for e in after if e["type"] == "assistant/message"]
    assert [r["data"]["message"]["content"] for r in replies] == [[{"type": "text", "text": "B got it"}]]
    assert after[-1]["type"] == "turn/end" and after[-1]["data"]["turn"] == 2
