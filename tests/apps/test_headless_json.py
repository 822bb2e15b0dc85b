"""``pydsh headless`` takes DeepSeek Harness's command line: task words, ``-``/stdin, ``--session-id``, ``--json`` events.

Each run is a subprocess against the loopback mock model. Where the reference runtime is available
(``PYDSH_REFERENCE_DSH``), the same command lines run there too and must stream the same events.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pydsh.testing.mock_model_server import MockModelServer
from tests.sdk.reference import REFERENCE, needs_reference

REPO = Path(__file__).resolve().parents[2]
PYDSH = (sys.executable, "-m", "pydsh", "headless")
READS = {
    "reasoning": "Looking.",
    "text": "Reading both.",
    "tool_calls": [
        {"name": "read", "arguments": {"file_path": "a.txt"}},
        {"name": "read", "arguments": {"file_path": "missing.txt"}},
    ],
}
STEP = [("status", "step_start"), ("status", "step_end")]


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]

    def prompts(self) -> list[str]:
        """The first user text of each model request."""
        return [r["body"]["messages"][0]["content"][0]["text"] for r in self.requests]


async def headless(
    cwd: Path,
    *args: str,
    script: list[Any] = (),
    stdin: bytes = b"",
    runtime: tuple[str, ...] = PYDSH,
    home: Path | None = None,
) -> Ran:
    """``<runtime> ARGS`` (``runtime`` names the headless app) against a mock answering ``script``.

    stdin is a pipe carrying ``stdin``; ``home`` replaces the test's ``DSH_HOME``.
    """
    async with MockModelServer(sequence=script, chunkDelayMs=0) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DEEPSEEK_BASE_URL": server.base_url,
            "DEEPSEEK_API_KEY": "sk-test",
        }
        if home is not None:
            env["DSH_HOME"] = str(home)
        proc = await asyncio.create_subprocess_exec(
            *runtime,
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
        assert proc.returncode is not None
        return Ran(proc.returncode, out.decode(), err.decode(), list(server.requests))


def shape(lines: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(line["type"], line.get("phase")) for line in lines]


async def test_json_streams_the_run_as_dsh_events(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    ran = await headless(tmp_path, "--json", "read", "them", script=[READS, {"text": "Done."}])
    assert ran.code == 0, ran.stderr
    assert all(line.startswith("{") and ", " not in line[:12] for line in ran.stdout.splitlines())
    lines = ran.lines()
    assert shape(lines) == [
        ("session", None),
        ("status", "turn_start"),
        ("status", "step_start"),
        ("thinking", None),
        ("text", None),
        ("tool_call", None),
        ("tool_call", None),
        ("tool_result", None),
        ("tool_result", None),
        ("status", "step_end"),
        *STEP[:1],
        ("text", None),
        *STEP[1:],
        ("status", "turn_end"),
        ("final", None),
    ]
    session_id = lines[0]["sessionId"]
    assert lines[0] == {"type": "session", "sessionId": session_id, "cwd": str(tmp_path)}
    assert lines[2] == {"type": "status", "phase": "step_start", "turn": 1, "step": 1}
    assert lines[3:5] == [{"type": "thinking", "text": "Looking."}, {"type": "text", "text": "Reading both."}]
    call = lines[5]
    assert (call["tool"], call["input"]) == ("read", {"file_path": "a.txt"})
    assert lines[7]["callId"] == call["callId"] and lines[7]["status"] == "completed"
    assert "1: alpha" in lines[7]["result"]
    assert lines[8]["callId"] == lines[6]["callId"] != call["callId"]
    assert lines[8]["status"] == "error" and "not found" in lines[8]["result"]
    assert lines[9]["usage"]["outputTokens"] >= 1
    assert lines[-2] == {"type": "status", "phase": "turn_end", "turn": 1, "reason": {"kind": "completed"}}
    final = lines[-1]
    assert (final["text"], final["finish_reason"], final["session_id"]) == ("Done.", "completed", session_id)
    assert ran.prompts() == ["read them", "read them"]


async def test_json_failures_carry_the_error_code_and_message(tmp_path: Path) -> None:
    turn = await headless(tmp_path, "--json", "hi", script=["auth_error"])
    assert turn.code == 1
    lines = turn.lines()
    error = lines[-2]["reason"]["error"]
    assert (lines[-2]["reason"]["kind"], error["code"], error["message"]) == (
        "error",
        "AUTH",
        "mock authentication failed",
    )
    assert (lines[-1]["type"], lines[-1]["text"], lines[-1]["finish_reason"]) == ("final", "", "error")
    assert "pydsh: AUTH: mock authentication failed" in turn.stderr
    missing = await headless(tmp_path, "--json", "--session-id", "nope", "hi")
    refusal = 'session "nope" not found; omit --session-id to start a new session'
    assert (missing.code, missing.lines()) == (2, [{"type": "error", "code": "not_found", "message": refusal}])
    assert missing.stderr == f"error: {refusal}\n"
    unknown = await headless(tmp_path, "--json", "--bogus", "hi")
    assert (unknown.code, unknown.lines()) == (
        2,
        [{"type": "error", "code": "usage", "message": "unknown option '--bogus'"}],
    )
    assert unknown.stderr == "error: unknown option '--bogus'\n"


async def test_task_words_are_joined_and_stdin_is_read_for_dash_or_no_task(tmp_path: Path) -> None:
    words = await headless(tmp_path, "say", "--json", "hi", "there", script=[{"text": "ok"}])
    dash = await headless(tmp_path, "-", script=[{"text": "ok"}], stdin=b"from stdin\n")
    piped = await headless(tmp_path, script=[{"text": "ok"}], stdin=b"piped task")
    after_dashes = await headless(tmp_path, "hi", "--", "--json", script=[{"text": "ok"}])
    assert [r.prompts() for r in (words, dash, piped, after_dashes)] == [
        ["say hi there"],
        ["from stdin\n"],
        ["piped task"],
        ["hi --json"],
    ]
    assert (dash.stdout, after_dashes.stdout) == ("ok\n", "ok\n")
    mixed = await headless(tmp_path, "say", "-")
    assert (mixed.code, mixed.stderr) == (2, "error: `-` must be the only task argument\n")
    nothing = await headless(tmp_path)
    assert (nothing.code, nothing.stderr) == (
        2,
        'error: a task is required, for example: pydsh headless "run the tests"\n',
    )


async def test_session_id_continues_a_persisted_session(tmp_path: Path) -> None:
    first = await headless(tmp_path, "--session", "s-1", "remember 7", script=[{"text": "noted"}])
    assert first.code == 0, first.stderr
    again = await headless(tmp_path, "--json", "--session-id", "s-1", "what was it?", script=[{"text": "7"}])
    assert again.code == 0, again.stderr
    lines = again.lines()
    assert lines[0]["sessionId"] == "s-1" and lines[1] == {"type": "status", "phase": "turn_start", "turn": 2}
    assert "noted" in json.dumps(again.requests[0]["body"]["messages"])
    both = await headless(tmp_path, "--session-id", "s-1", "--cwd", ".", "x")
    assert (both.code, both.stderr) == (2, "error: --session-id cannot be combined with --session or --cwd\n")


NO_TITLES = "- {id: session-title-llm, disabled: true}\n"
"""The reference's headless profile also asks the model for a title; off, so both runtimes make the same requests."""


@needs_reference
@pytest.mark.parametrize(
    ("args", "script"),
    [
        (("--json", "read", "them"), [READS, {"text": "Done."}]),
        (("--json", "hi"), ["auth_error"]),
        (("--json", "--session-id", "nope", "hi"), []),
    ],
    ids=["tools", "error-turn", "unknown-session"],
)
async def test_the_reference_streams_the_same_events(tmp_path: Path, args: tuple[str, ...], script: list[Any]) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "no-titles.yml").write_text(NO_TITLES)
    ours = await headless(tmp_path, *args, script=script)
    reference = (REFERENCE, "--profile", "headless", "--patch", str(tmp_path / "no-titles.yml"))
    theirs = await headless(tmp_path, *args, script=script, runtime=reference, home=tmp_path / "reference-home")
    assert shape(ours.lines()) == shape(theirs.lines())
    for mine, reference in zip(ours.lines(), theirs.lines(), strict=True):
        assert set(reference) <= set(mine)
        assert {k: mine[k] for k in ("phase", "turn", "step", "tool", "input", "status") if k in reference} == {
            k: reference[k] for k in ("phase", "turn", "step", "tool", "input", "status") if k in reference
        }
    assert (ours.code == 0) == (theirs.code == 0)
