"""``pydsh headless --preset``: joining a preset of a roster profile, and the rosterless refusal."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.apps.test_headless import patch_file, run
from tests.logs import log_lines, stored_log

ROSTER = [{"id": "presets", "name": "pydsh:include", "config": {"bundle": "presets"}}]


def test_preset_in_a_rosterless_profile_is_one_clear_error(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "never"}])
    result = run("--profile", "headless", "--patch", str(patch), "hi", "--preset", "minimal", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert 'error: the deployment composes no agent preset roster, so session "' in result.stderr
    assert result.stderr.rstrip().endswith('cannot run preset "minimal"')


def test_a_roster_profile_joins_the_named_preset(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "done"}], extra=ROSTER)
    result = run(
        "--profile",
        "headless",
        "--patch",
        str(patch),
        "hi",
        "--preset",
        "minimal",
        "--json",
        "--session",
        "s-1",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["finish_reason"] == "completed"
    assert "without joining an agent preset" not in result.stderr
    header = json.loads(log_lines(stored_log(Path(os.environ["DSH_HOME"]) / "sessions", "s-1"))[0])
    assert header["agentPreset"] == "minimal"
