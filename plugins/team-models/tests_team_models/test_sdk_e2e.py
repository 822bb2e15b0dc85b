"""End to end: ``pydsh plugin add ./plugins/team-models`` in a throwaway environment, then a Lead driven by the
published SDK client sets its teammate's model; the loopback model server records which model each request used."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pydsh.session.persistence.jsonl import parse_log
from tests.apps.plugin_dist import make_venv

deepseek_harness = pytest.importorskip("deepseek_harness", reason="the published SDK client is not installed")

from tests.sdk.conftest import ThreadedMock  # noqa: E402  (that rig imports the published client too)

PLUGIN_DIR = Path(__file__).resolve().parents[1]
REPO = PLUGIN_DIR.parents[1]
LEAD_MODEL = "deepseek-v4-flash"
GRADER_ROUTE = ("openai-compat", "model-z")
TEAMS_PATCH = [{"id": "agent-teams", "disabled": False}, {"id": "tool-agent-team", "disabled": False}]
FORBIDDEN = "Error: a teammate may change only its own model route"


def tool(tool_name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model step that calls one tool."""
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


class Models:
    """A loopback model server answering each agent from its own script; agents are told apart by the
    teammate identity text in their requests, and every request is kept with the agent it came from."""

    def __init__(self, scripts: dict[str, list[dict[str, Any]]]) -> None:
        self.scripts = {who: deque(steps) for who, steps in scripts.items()}
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.changed = threading.Condition()
        self.mock = ThreadedMock([], hold=self.route)

    async def route(self, body: dict[str, Any]) -> None:
        """Put the requesting agent's next step at the front of the queue (the server takes it right after)."""
        text = json.dumps(body)
        who = next((n for n in self.scripts if f'You are teammate \\"{n}\\"' in text), "lead")
        steps = self.scripts.setdefault(who, deque())
        self.mock.server.queue.appendleft(steps.popleft() if steps else {"text": "done"})
        with self.changed:
            self.seen.append((who, body))
            self.changed.notify_all()

    def script(self, who: str, steps: list[dict[str, Any]]) -> None:
        """``who``'s next steps, replacing any it did not take."""
        self.scripts[who] = deque(steps)

    def models_of(self, who: str) -> list[str]:
        """The ``model`` of each of ``who``'s requests, in order."""
        return [body["model"] for name, body in self.seen if name == who]

    def paths_of(self, who: str) -> set[str]:
        """The request paths (one per wire dialect, so per provider) ``who`` used."""
        bodies = [id(body) for name, body in self.seen if name == who]
        return {r["path"] for r in self.mock.requests if id(r["body"]) in bodies}

    def wait(self, who: str, count: int) -> list[dict[str, Any]]:
        """``who``'s requests once there are at least ``count`` of them."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.models_of(who)) >= count, timeout=120)
            return [body for name, body in self.seen if name == who]


def venv_without_this_plugin(path: Path) -> Path:
    """A virtual environment seeing this interpreter's packages except ``pydsh-team-models``, so the copy
    installed into it is the only one and removing it is seen; returns its python."""
    python = make_venv(path)
    (pth,) = path.rglob("parent-environment.pth")
    mirror = path / "parent-packages"
    mirror.mkdir()
    for parent in site.getsitepackages():
        for entry in Path(parent).iterdir() if Path(parent).is_dir() else ():
            if "team_models" not in entry.name and not (mirror / entry.name).exists():
                (mirror / entry.name).symlink_to(entry)
    pth.write_text(f"import site; site.addsitedir({str(mirror)!r})\n")
    return python


def pydsh_in(installed: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pydsh ARGS`` in the virtual environment."""
    return subprocess.run(
        [str(installed["python"]), "-m", "pydsh", *args],
        cwd=installed["root"],
        env=installed["env"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, Any]:
    """A virtual environment with ``pydsh-team-models`` added to profile ``sdk`` and a ``pydsh`` launcher."""
    python = venv_without_this_plugin(tmp_path / "venv")
    shutil.copytree(PLUGIN_DIR, tmp_path / "plugins" / "team-models", ignore=shutil.ignore_patterns("*.egg-info"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSH_HOME": str(tmp_path / "home")}
    paths = {"python": python, "env": env, "root": tmp_path}
    added = pydsh_in(paths, "plugin", "--profile", "sdk", "add", "./plugins/team-models")
    assert added.returncode == 0, added.stderr
    launcher = tmp_path / "venv" / "bin" / "pydsh"
    launcher.write_text(f'#!/bin/sh\nexec "{python}" -m pydsh "$@"\n')
    launcher.chmod(0o755)
    (tmp_path / "ws").mkdir()
    (tmp_path / "teams.yml").write_text(json.dumps(TEAMS_PATCH))
    return {**paths, "launcher": launcher}


def state_file(installed: dict[str, Any]) -> Path:
    """The plugin's state file under the test's ``DSH_HOME`` (the default ``stateFile``)."""
    return Path(installed["root"]) / "home" / "storages" / "team-models" / "state.json"


def overrides(installed: dict[str, Any]) -> dict[str, Any]:
    """The overrides of the one Team in the state file."""
    (team,) = json.loads(state_file(installed).read_text())["teams"].values()
    return dict(team["overrides"])


def team_events(installed: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``team/*`` events of every session log (either encoding) under the test's ``DSH_HOME``."""
    logs = sorted((Path(installed["root"]) / "home" / "sessions").glob("*/*/session.v4.jsonl*"))
    stored = [parse_log(log.read_bytes(), log, compressed=log.suffix == ".zstd") for log in logs]
    return [event for log in stored for event in log.events if event["type"].startswith("team/")]


@contextmanager
def harness(installed: dict[str, Any], models: Models) -> Iterator[Any]:
    """A published-client harness over the venv's ``pydsh --profile sdk`` with Teams enabled."""
    root = installed["root"]
    env = {"PYTHONPATH": str(REPO), "OPENAI_BASE_URL": models.mock.base_url}
    with deepseek_harness.DeepSeekHarness(
        dsh_bin=str(installed["launcher"]),
        dsh_home=str(root / "home"),
        cwd=str(root / "ws"),
        api_key="sk-test",
        base_url=models.mock.base_url,
        model=LEAD_MODEL,
        env=env,
        patches=(str(root / "teams.yml"),),
    ) as running:
        yield running


def test_lead_sets_grader_model_across_a_restart(installed: dict[str, Any]) -> None:
    lead_id = "lead-e2e"
    route = "/".join(GRADER_ROUTE)
    models = Models(
        {
            "lead": [
                tool("spawn_teammate", name="grader", description="grades", prompt="grade"),
                tool("spawn_teammate", name="coder", description="codes", prompt="code"),
                {"text": "spawned"},
                tool("team_model_set", target="grader", model=route),
                {"text": "set"},
                tool("send_message", target="grader", message="grade again"),
                {"text": "sent"},
            ],
            "grader": [{"text": "graded"}, {"text": "graded again"}],
            "coder": [{"text": "coded"}],
        }
    )
    try:
        with harness(installed, models) as running:
            lead = running.start_session(lead_id)
            lead.run("spawn the team")
            models.wait("grader", 1)
            models.wait("coder", 1)
            lead.run("switch the grader")
            lead.run("wake the grader")
            models.wait("grader", 2)
        assert models.models_of("grader") == [LEAD_MODEL, GRADER_ROUTE[1]]
        assert models.models_of("coder") == [LEAD_MODEL]
        assert models.paths_of("lead") == models.paths_of("coder") == {"/v1/messages"}
        assert models.paths_of("grader") == {"/v1/messages", "/chat/completions"}
        assert set(models.models_of("lead")) == {LEAD_MODEL}

        models.script("lead", [tool("send_message", target="grader", message="after restart"), {"text": "ok"}])
        models.script("grader", [tool("team_model_set", target="coder", model=route), {"text": "refused"}])
        lead_before = len(models.models_of("lead"))
        with harness(installed, models) as running:
            running.resume_session(lead_id).run("wake the grader once more")
            graded = models.wait("grader", 4)
        assert models.models_of("grader")[2:] == [GRADER_ROUTE[1], GRADER_ROUTE[1]]
        assert set(models.models_of("lead")[lead_before:]) == {LEAD_MODEL}
        assert graded[-1]["messages"][-1]["content"] == FORBIDDEN
        assert overrides(installed) == {"grader": {"provider": GRADER_ROUTE[0], "model": GRADER_ROUTE[1]}}
    finally:
        models.mock.close()


def test_removed_distribution_is_one_warning_and_loses_nothing(installed: dict[str, Any]) -> None:
    lead_id = "lead-removal"
    models = Models(
        {
            "lead": [
                tool("spawn_teammate", name="grader", description="grades", prompt="grade"),
                {"text": "spawned"},
                tool("team_model_set", target="grader", model="/".join(GRADER_ROUTE)),
                {"text": "set"},
            ],
            "grader": [{"text": "graded"}],
        }
    )
    try:
        with harness(installed, models) as running:
            lead = running.start_session(lead_id)
            lead.run("spawn the grader")
            models.wait("grader", 1)
            lead.run("switch the grader")
        state, events = state_file(installed).read_bytes(), team_events(installed)
        assert events

        removed = subprocess.run(
            [str(installed["python"]), "-m", "pip", "uninstall", "-y", "pydsh-team-models"],
            env=installed["env"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert removed.returncode == 0, removed.stderr
        started = pydsh_in(
            installed, "--profile", "sdk", "--patch", str(installed["root"] / "teams.yml"), "--dump-config"
        )
        assert [line for line in started.stderr.splitlines() if line.startswith("pydsh:")] == [
            'pydsh: warning: bundle "team-models" skipped: distribution pydsh-team-models is not installed '
            "(reinstall it, or run pydsh plugin --profile sdk remove pydsh-team-models)"
        ]

        models.script("lead", [{"text": "still here"}])
        with harness(installed, models) as running:
            assert running.resume_session(lead_id).run("still there?").final_response == "still here"
        assert state_file(installed).read_bytes() == state
        assert team_events(installed)[: len(events)] == events
    finally:
        models.mock.close()
