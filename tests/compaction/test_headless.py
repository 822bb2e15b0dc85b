"""Manual compaction from headless: ``--compact ID`` and a ``/compact`` prompt (spec 10 §4.8), as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.apps.test_headless import patch_file, run
from tests.compaction.helpers import summary_text, write_lines
from tests.logs import log_lines, stored_log


def log_events(home: Path, session_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_lines(stored_log(home, session_id))[1:]]


def first_run(tmp_path: Path) -> None:
    write_lines(tmp_path / "f.txt", 40)
    read = {"tool_calls": [{"name": "read", "arguments": {"file_path": "f.txt"}}]}
    patch = patch_file(tmp_path, [read, {"text": "read it"}], "first.yml")
    result = run("--profile", "headless", "--patch", str(patch), "--session", "s1", "read f.txt", cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_compact_flag_compacts_a_persisted_session(tmp_path: Path, monkeypatch: Any) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    first_run(tmp_path)
    patch = patch_file(tmp_path, [{"purpose": "compaction", "text": summary_text("read f.txt")}], "compact.yml")
    result = run("--profile", "headless", "--patch", str(patch), "--compact", "s1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "into a checkpoint" in result.stdout
    assert "compacted" in result.stderr
    events = log_events(home, "s1")
    types = [e["type"] for e in events]
    start = types.index("compaction/start")
    assert types[start : start + 4] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert events[start]["data"]["turn"] is None and events[start]["data"]["sourceCommandId"]
    assert "turn/start" not in types[start:]


def test_compact_prompt_is_a_command_not_a_model_call(tmp_path: Path, monkeypatch: Any) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DSH_HOME", str(home))
    first_run(tmp_path)
    patch = patch_file(tmp_path, [{"purpose": "compaction", "text": summary_text()}], "slash.yml")
    result = run("--profile", "headless", "--patch", str(patch), "--resume", "s1", "/compact", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "/compact: compacted" in result.stderr
    events = log_events(home, "s1")
    types = [e["type"] for e in events]
    run_at = types.index("command/run")
    assert types[run_at:] == [
        "command/run",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "command/done",
        "turn/end",
    ]
    command_id = events[run_at]["data"]["commandId"]
    assert events[run_at + 1]["data"]["sourceCommandId"] == command_id
    turn = next(e["data"]["turn"] for e in reversed(events[:run_at]) if e["type"] == "turn/start")
    assert events[run_at + 1]["data"]["turn"] == turn == events[-1]["data"]["turn"]
    assert events[-1]["data"]["reason"] == {"kind": "completed"}


def test_compact_usage_errors(tmp_path: Path) -> None:
    result = run("--profile", "headless", "--compact", "s1", "task", cwd=tmp_path)
    assert result.returncode == 2 and "--compact ID takes no task" in result.stderr
    result = run("--profile", "headless", "--compact", "nope", cwd=tmp_path)
    assert result.returncode == 2 and 'session "nope" not found' in result.stderr


def test_a_profile_without_the_meter_stops_with_one_message(tmp_path: Path) -> None:
    patch = tmp_path / "no-meter.yml"
    patch.write_text(
        '- {id: token-meter, disabled: true}\n- insert: [{id: presets, name: "pydsh:include", config: {bundle: presets}}]\n'
    )
    result = run("--profile", "headless", "--patch", str(patch), "hi", cwd=tmp_path)
    assert result.returncode == 2
    verdicts = [line for line in result.stderr.splitlines() if line.startswith("pydsh: CONFIG_INVALID")]
    assert verdicts == [
        "pydsh: CONFIG_INVALID: compaction-basic needs the token_meter service: "
        "add the token-meter row to the host composition (base)"
    ]
