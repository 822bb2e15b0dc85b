"""The order of every waterfall's listeners is declared, printed by ``--dump-events``, and a contradictory
order fails composition with one clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

PRE_STEP_ORDER = [
    "model-selection",
    "command-compact",
    "command-schedule",
    "mcp-prompt-commands",
    "goal-round-driver",
    "plan-mode",
    "time-context",
    "session-checkpoint-policy",
    "instructions",
    "skills-invocation",
    "skills-catalog",
    "compaction",
]


def pydsh(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSH_HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, "-m", "pydsh", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def patch(tmp_path: Path, plugin: str) -> str:
    path = tmp_path / f"{plugin}.yml"
    path.write_text(yaml.safe_dump([{"insert": [{"id": plugin, "name": f"tests.host.order_plugins:{plugin}"}]}]))
    return str(path)


def test_dump_events_prints_each_waterfall_in_dispatch_order(tmp_path: Path) -> None:
    done = pydsh(tmp_path, "--profile", "headless", "--patch", patch(tmp_path, "inner"), "--dump-events")
    assert done.returncode == 0, done.stderr
    table = yaml.safe_load(done.stdout)
    pre_step = table["agent/pre-step"]
    assert pre_step["mode"] == "waterfall" and pre_step["order"] == PRE_STEP_ORDER
    names = [listener["name"] for listener in pre_step["listeners"]]
    assert names == [
        "command-compact",
        "mcp-prompt-commands",
        "goal-round-driver",
        "plan-mode",
        "session-checkpoint-policy",
        "instructions",
        "inner",
        "skills-invocation",
        "skills-catalog",
        "compaction",
    ]
    inner = pre_step["listeners"][6]
    assert inner == {"name": "inner", "before": ["skills-invocation"], "after": ["instructions"]}
    assert [listener["name"] for listener in table["agent/request-error"]["listeners"]] == ["llm-retry", "compaction"]
    assert table["session/event"]["mode"] == "emit"


def test_a_contradictory_order_fails_composition_naming_the_cycle(tmp_path: Path) -> None:
    for args in (("--dump-events",), ("say hi",)):
        done = pydsh(tmp_path, "--profile", "headless", "--patch", patch(tmp_path, "contrarian"), *args)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert (
            "pydsh: EVENT_ORDER: agent/pre-step: contradictory listener order "
            "session-checkpoint-policy -> instructions -> contrarian -> session-checkpoint-policy"
        ) in done.stderr
