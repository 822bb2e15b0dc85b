"""End to end: ``pydsh plugin add`` installs a real distribution with pip into a throwaway environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.apps.plugin_dist import make_distribution, make_venv

REPO = Path(__file__).resolve().parents[2]
PLUGIN = """\
import sys


def apply(ctx, config):
    print("demo plugin active", file=sys.stderr)
"""


def test_add_run_and_remove_in_a_virtual_environment(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    source = make_distribution(
        tmp_path / "demo",
        "pydsh-demo-plug",
        "demo_plug",
        bundles={"demo-plug": "- insert: [{id: demo-plug, name: demo-plug}]\n"},
        plugins={"demo-plug": PLUGIN},
    )
    replay = tmp_path / "replay.yml"
    replay.write_text(
        "- {id: llm-deepseek, disabled: true}\n"
        "- insert: [{id: llm-replay, name: llm-replay, config: {scripts: [{text: fine}]}}]\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "PIP_NO_INDEX": "1"}

    def pydsh(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "pydsh", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    added = pydsh("plugin", "--profile", "headless", "add", str(source))
    assert added.returncode == 0, added.stderr
    assert "Successfully installed pydsh-demo-plug-0.1.0" in added.stderr
    assert (
        added.stdout
        == 'added bundle "demo-plug" of pydsh-demo-plug to profile "headless"; it takes effect at the next start\n'
    )
    listing = pydsh("plugin", "--profile", "headless", "list")
    assert listing.stdout.splitlines()[-1] == "demo-plug  pydsh-demo-plug 0.1.0  ok"
    run = pydsh("headless", "--patch", str(replay), "hello")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "fine\n" and "demo plugin active" in run.stderr

    uninstalled = subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-y", "pydsh-demo-plug"], env=env, capture_output=True, check=False
    )
    assert uninstalled.returncode == 0
    run = pydsh("headless", "--patch", str(replay), "hello")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "fine\n"
    assert [line for line in run.stderr.splitlines() if line.startswith("pydsh:")] == [
        'pydsh: warning: bundle "demo-plug" skipped: distribution pydsh-demo-plug is not installed '
        "(reinstall it, or run pydsh plugin --profile headless remove pydsh-demo-plug)"
    ]

    assert pydsh("plugin", "--profile", "headless", "add", str(source)).returncode == 0
    removed = pydsh("plugin", "--profile", "headless", "remove", "pydsh-demo-plug")
    assert removed.returncode == 0, removed.stderr
    assert "Successfully uninstalled pydsh-demo-plug-0.1.0" in removed.stderr
    assert "demo-plug" not in pydsh("plugin", "--profile", "headless", "list").stdout
    assert pydsh("--profile", "headless", "--dump-config").stderr == ""
