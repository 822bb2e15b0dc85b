"""Sessions move between pydsh and the reference runtime (DeepSeek Harness 0.2.1rc2), both ways.

Each runtime is started by the published SDK client (``dsh_bin`` picks the executable) on one
``DSH_HOME``; one creates a session with a plain prompt and a ``read`` step, the other resumes it,
continues it with the history the first one wrote, and the first resumes it again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import deepseek_harness

from tests.sdk.conftest import PYDSH, REPO, ThreadedMock
from tests.sdk.reference import REFERENCE, needs_reference

pytestmark = needs_reference

SCRIPT = [
    {"text": "hello"},
    {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]},
    {"text": "read it"},
]
RUNTIMES = {"pydsh": PYDSH, "reference": REFERENCE}


def harness(runtime: str, server: ThreadedMock, home: Path, ws: Path) -> Any:
    """The published client on ``runtime``'s executable (pydsh imports this checkout)."""
    return deepseek_harness.DeepSeekHarness(
        dsh_bin=RUNTIMES[runtime],
        dsh_home=str(home),
        cwd=str(ws),
        api_key="sk-test",
        base_url=server.base_url,
        env={"PYTHONPATH": str(REPO)},
    )


def said(body: dict[str, Any]) -> list[str]:
    """Text and tool blocks of a model request, in order: ``user:hi``, ``tool_use:read``, …"""
    out = []
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if block["type"] == "text":
                out.append(f"{message['role']}:{block['text']}")
            elif block["type"] in ("tool_use", "tool_result"):
                out.append(f"{block['type']}:{block.get('name', '')}")
    return out


def created_by(runtime: str, server: ThreadedMock, home: Path, ws: Path) -> int:
    """Create ``t1`` in ``runtime``: a plain prompt, then a prompt with one ``read`` step; the last seq."""
    client = harness(runtime, server, home, ws)
    try:
        session = client.start_session("t1")
        first = session.run("hi")
        assert (first.final_response, first.finish_reason) == ("hello", "completed")
        second = session.run("read a.txt")
        assert second.final_response == "read it"
        assert "tool/result" in [e["type"] for e in second.events]
        last: int = second.events[-1]["seq"]
    finally:
        client.close()
    return last


def resumed_in(runtime: str, server: ThreadedMock, home: Path, ws: Path, prompt: str, after: int) -> int:
    """Resume ``t1`` in ``runtime`` and run ``prompt``; its model request carries the earlier history."""
    seen = len(server.requests)
    client = harness(runtime, server, home, ws)
    try:
        result = client.resume_session("t1").run(prompt)
    finally:
        client.close()
    assert result.finish_reason == "completed"
    assert result.events[0]["seq"] > after
    history = said(server.requests[seen]["body"])
    for earlier in ("user:hi", "assistant:hello", "user:read a.txt", "tool_use:read", "tool_result:"):
        assert earlier in history, (earlier, history)
    assert history.index("user:hi") < history.index("tool_use:read") < history.index(f"user:{prompt}")
    last: int = result.events[-1]["seq"]
    return last


def one_zstd_log(home: Path) -> Path:
    """The session's only log: zstd, where both runtimes put it."""
    [directory] = (home / "sessions").iterdir()
    logs = sorted(p.name for p in (directory / "t1").iterdir() if p.name.startswith("session."))
    assert logs == ["session.lock", "session.v4.jsonl.zstd"]
    return directory / "t1" / "session.v4.jsonl.zstd"


def round_trip(creator: str, other: str, mock: Callable[..., ThreadedMock], tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    server = mock(SCRIPT, repeat_last=True)
    last = created_by(creator, server, home, ws)
    log = one_zstd_log(home)
    written = log.read_bytes()
    last = resumed_in(other, server, home, ws, "continue here", last)
    assert log.read_bytes().startswith(written)
    resumed_in(creator, server, home, ws, "and back", last)
    one_zstd_log(home)


def test_a_reference_session_resumes_and_continues_in_pydsh(mock: Callable[..., ThreadedMock], tmp_path: Path) -> None:
    round_trip("reference", "pydsh", mock, tmp_path)


def test_a_pydsh_session_resumes_and_continues_in_the_reference(
    mock: Callable[..., ThreadedMock], tmp_path: Path
) -> None:
    round_trip("pydsh", "reference", mock, tmp_path)
