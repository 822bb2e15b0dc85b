"""``pydsh headless`` end to end as a subprocess: answers, exit codes, JSON, crash and resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pydsh.session.persistence.jsonl import JsonlPersistence

REPO = Path(__file__).resolve().parents[2]


def patch_file(tmp_path: Path, scripts: list[Any], name: str = "patch.yml", extra: list[Any] = ()) -> Path:
    ops = [
        {"id": "llm-deepseek", "disabled": True},
        {
            "insert": [
                {
                    "id": "llm-replay",
                    "name": "llm-replay",
                    "config": {
                        "scripts": scripts,
                        "providers": [
                            {
                                "id": "deepseek-official",
                                "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000}],
                            }
                        ],
                    },
                },
                *extra,
            ]
        },
    ]
    path = tmp_path / name
    path.write_text(yaml.safe_dump(ops))
    return path


def pydsh(*args: str, cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "pydsh", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = pydsh(*args, cwd=cwd)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_answer_on_stdout_trace_on_stderr(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "The answer is 42."}])
    result = run("--profile", "headless", "--patch", str(patch), "what is it?", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "The answer is 42.\n"
    assert "assistant: The answer is 42." in result.stderr


def test_json_ends_with_the_final_event(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "done"}])
    result = run("--profile", "headless", "--patch", str(patch), "go", "--json", "--session", "s-json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0] == {"type": "session", "sessionId": "s-json", "cwd": str(tmp_path)}
    final = lines[-1]
    assert (final["type"], final["text"], final["finish_reason"]) == ("final", "done", "completed")
    assert final["session_id"] == "s-json"
    assert final["usage"]["outputTokens"] >= 1


def test_error_turn_exits_one_with_code_and_message(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"throw": {"code": "AUTH", "message": "bad key", "status": 401}}])
    result = run("--profile", "headless", "--patch", str(patch), "go", cwd=tmp_path)
    assert result.returncode == 1
    assert "pydsh: AUTH: bad key" in result.stderr


def test_usage_errors_exit_two(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "first"}])
    ok = run("--profile", "headless", "--patch", str(patch), "go", "--session", "taken", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    again = run("--profile", "headless", "--patch", str(patch), "go", "--session", "taken", cwd=tmp_path)
    assert again.returncode == 2
    assert 'error: session "taken" already exists; continue it with --resume taken' in again.stderr
    missing = run("--profile", "headless", "--patch", str(patch), "go", "--resume", "ghost", cwd=tmp_path)
    assert missing.returncode == 2
    assert 'error: session "ghost" not found' in missing.stderr
    both = run("--profile", "headless", "--patch", str(patch), "go", "--resume", "x", "--cwd", ".", cwd=tmp_path)
    assert both.returncode == 2
    newline = run("--profile", "headless", "--patch", str(patch), "go", "--session", "a\nb", cwd=tmp_path)
    assert newline.returncode == 2
    assert "error: --session id contains the control character U+000A at index 1" in newline.stderr


def test_sigkill_during_a_tool_call_then_resume_repairs_and_continues(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    block_row = {"id": "blocking-tool", "name": "tests.apps.blocking_tool"}
    first = patch_file(
        tmp_path, [{"tool_calls": [{"name": "block", "arguments": {"ready": str(ready)}}]}], "first.yml", [block_row]
    )
    proc = pydsh("--profile", "headless", "--patch", str(first), "block now", "--session", "crash", cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    second = patch_file(tmp_path, [{"text": "continued after the crash"}], "second.yml", [block_row])
    result = run("--profile", "headless", "--patch", str(second), "--resume", "crash", "continue", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "continued after the crash\n"

    store = JsonlPersistence(Path(os.environ["DSH_HOME"]) / "sessions")
    import asyncio

    events = asyncio.run(_read(store, "crash"))
    kinds = [e["type"] for e in events]
    call = kinds.index("tool/call")
    assert kinds[call + 1 : call + 5] == ["tool/result", "step/end", "turn/end", "session/end-seed"]
    closer = events[call + 1]
    assert closer["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert closer["sourceEventSeqs"] == [events[call]["seq"]]
    assert events[call + 3]["data"]["reason"] == {"kind": "interrupted"}
    header = next(e for e in events[call:] if e["type"] == "request/header")
    assert header["data"]["reason"] == "resume"
    assert events[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_signal_interrupts_the_turn_exits_128_plus_n_and_resumes(tmp_path: Path, signum: signal.Signals) -> None:
    ready = tmp_path / "ready"
    block_row = {"id": "blocking-tool", "name": "tests.apps.blocking_tool"}
    first = patch_file(
        tmp_path, [{"tool_calls": [{"name": "block", "arguments": {"ready": str(ready)}}]}], "first.yml", [block_row]
    )
    proc = pydsh("--profile", "headless", "--patch", str(first), "block now", "--session", "sig", cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert f'interrupted by {signum.name}; continue with: pydsh headless --resume sig "..."' in err

    store = JsonlPersistence(Path(os.environ["DSH_HOME"]) / "sessions")
    import asyncio

    events = asyncio.run(_read(store, "sig"))
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    call = next(e for e in events if e["type"] == "tool/call")
    assert any(e["type"] == "tool/result" and e.get("sourceEventSeqs") == [call["seq"]] for e in events)

    second = patch_file(tmp_path, [{"text": "continued after the signal"}], "second.yml", [block_row])
    result = run("--profile", "headless", "--patch", str(second), "--resume", "sig", "continue", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "continued after the signal\n"
    resumed = asyncio.run(_read(store, "sig"))
    assert resumed[: len(events)] == events
    assert resumed[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}


async def _read(store: JsonlPersistence, sid: str) -> list[dict[str, Any]]:
    handle = await store.open(sid, "read")
    return await handle.read()


DELEGATE = {"tool_calls": [{"name": "subagent", "arguments": {"description": "count", "prompt": "Count slowly"}}]}


def test_background_subagents_are_waited_for_and_their_result_answers(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [[DELEGATE, {"text": "started it"}, {"text": "it counted to three"}], [{"text": "3"}]])
    result = run("--profile", "headless", "--patch", str(patch), "delegate", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "it counted to three\n"


def test_waiting_for_background_subagents_is_bounded_and_says_what_it_cut_short(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [[DELEGATE, {"text": "started it"}], [{"hang": True}]])
    args = ("--profile", "headless", "--patch", str(patch), "delegate", "--wait-children", "1", "--session", "root")
    result = run(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "started it\n"
    [line] = [s for s in result.stderr.splitlines() if s.startswith("pydsh: stopped waiting")]
    assert line.startswith("pydsh: stopped waiting for background subagents after 1 s; their turns were aborted: ")
    store = JsonlPersistence(Path(os.environ["DSH_HOME"]) / "sessions")
    child = next(r["header"]["id"] for r in asyncio.run(store.list()) if r["header"].get("parentSession") == "root")
    ends = [e for e in asyncio.run(_read(store, child)) if e["type"] == "turn/end"]
    assert ends[-1]["data"]["reason"]["kind"] == "aborted"
