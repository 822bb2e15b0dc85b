"""End to end: ``pydsh plugin add`` installs a real distribution with pip into a throwaway environment."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.apps.plugin_dist import build_pydsh_wheel, make_distribution, make_venv

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


def test_a_wheel_install_adds_pydsh_s_own_plugins_by_name_offline_and_a_running_web_loads_one(tmp_path: Path) -> None:
    """From pydsh's wheel alone, with no index: the seed's spellings install the shipped plugin wheels, and a
    ``pydsh web`` already running loads agent-message at once and says team-models waits for its next start."""
    wheel = build_pydsh_wheel(REPO, tmp_path / "dist")
    python = make_venv(tmp_path / "venv", hide=("pydsh",))
    env = {**os.environ, "PIP_NO_INDEX": "1", "DSH_HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(python), *args], cwd=work, env=env, capture_output=True, text=True, timeout=180)

    assert run("-c", "import pydsh").returncode == 1
    installed = run("-m", "pip", "install", "--no-deps", str(wheel))
    assert installed.returncode == 0, installed.stderr
    web = subprocess.Popen(
        [str(python), "-m", "pydsh", "web", "--port", "0", "--no-open"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    try:
        assert web.stdout is not None and web.stdout.readline().startswith("pydsh web: http://127.0.0.1:")
        threading.Thread(target=lambda: said.extend(web.stderr or ()), daemon=True).start()
        added = run("-m", "pydsh", "plugin", "--profile", "web", "add", "@deepseek-ai/dsh-agent-message")
        assert added.returncode == 0, added.stderr
        shipped = Path(run("-c", "import pydsh; print(pydsh.__file__)").stdout.strip()).parent / "shipped_plugins"
        assert added.stderr.startswith(
            "pydsh: @deepseek-ai/dsh-agent-message is pydsh's own pydsh-agent-message: installing "
            f"{shipped / 'pydsh_agent_message-0.1.0-py3-none-any.whl'}\n"
        )
        assert "Successfully installed pydsh-agent-message-0.1.0" in added.stderr
        assert added.stdout == (
            'added bundle "agent-message" of pydsh-agent-message to profile "web"; a running pydsh web loads it at '
            "once if its plugins allow it, else it takes effect at the next start\n"
        )
        loaded = 'bundle "agent-message" was added to profile "web": loaded without a restart'
        assert wait_for(lambda: any(loaded in line for line in said)), said
        added = run("-m", "pydsh", "plugin", "--profile", "web", "add", "dsh-team-models")
        assert added.returncode == 0, added.stderr
        assert wait_for(lambda: any('bundle "team-models" was added' in line for line in said)), said
        assert "it takes effect at the next start: plugin team-models does not declare" in said[-1]
        listing = run("-m", "pydsh", "plugin", "--profile", "web", "list").stdout.splitlines()
        assert listing[-2:] == [
            "agent-message  pydsh-agent-message 0.1.0  ok",
            "team-models  pydsh-team-models 0.1.0  ok",
        ]
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=30)
    assert web.returncode == 0, said


def wait_for(check: Callable[[], bool], seconds: float = 20) -> bool:
    """Whether ``check()`` turns true within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False
