"""``pydsh tui`` options and the bare ``pydsh``: refusals are one line and exit 2, before any screen opens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pydsh.apps import cli
from pydsh.apps.tui.options import TuiOptions, parse_options
from pydsh.apps.usage import LaunchFailed, UsageError
from pydsh.kernel.compose import walk

REPO = Path(__file__).resolve().parents[3]


def test_options_name_the_session_workspace_and_route(tmp_path: Path) -> None:
    assert parse_options([]) == TuiOptions()
    assert parse_options(["--resume", "abc"]) == TuiOptions(resume="abc")
    assert parse_options(["--cwd", str(tmp_path), "--provider", "p", "--model", "m"]) == TuiOptions(
        None, str(tmp_path), "p", "m"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "p"], "give --provider and --model together"),
        (["--resume", "a", "--cwd", "."], "--resume keeps the session's workspace"),
        (["--cwd", "/no/such/dir"], '--cwd "/no/such/dir"'),
        (["stray"], "unknown argument 'stray'"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_options(args)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_pydsh_tui_with_an_unknown_session_says_so_and_exits_2(isolated_home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pydsh", "tui", "--resume", "no-such-session"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == 'pydsh tui: session "no-such-session" not found'


def test_a_bare_pydsh_in_a_terminal_runs_the_tui_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str | None] = []
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(cli, "run_profile", lambda launch: ran.append(launch.profile) or 0)
    assert cli.main([]) == 0
    assert ran == ["tui"]


def test_a_bare_pydsh_without_textual_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr("pydsh.apps.tui.textual_missing", lambda: True)
    assert cli.main([]) == 2
    assert (
        capsys.readouterr().err
        == "pydsh: the terminal UI needs the textual package: pip install textual (or reinstall pydsh)\n"
    )


def test_the_terminal_profile_draws_its_screen_before_composing(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pydsh tui`` hands the screen a composer instead of rows, so the prompt shows before the profile's
    YAML and plugins load; a composition error is the same one line and exit code as on any other path."""
    from pydsh.kernel import profiles

    order: list[str] = []
    composing = profiles.compose_profile
    monkeypatch.setattr(profiles, "compose_profile", lambda *a: order.append("compose") or composing(*a))
    composers: list[Any] = []

    def screen(profile: str, composed: Any, args: list[str]) -> int:
        order.append("screen")
        composers.append(composed)
        return 0

    monkeypatch.setattr("pydsh.apps.tui.launch", screen)
    assert cli.main(["tui"]) == 0
    assert order == ["screen"]
    assert any(row.name == "tui-app" for _holder, row in walk(composers[0]()))
    assert order == ["screen", "compose"]

    bad = tmp_path / "bad.yml"
    bad.write_text("rows: [\n")
    assert cli.main(["tui", "--patch", str(bad)]) == 0
    with pytest.raises(LaunchFailed) as failed:
        composers[1]()
    assert failed.value.exit_code == 2
    assert failed.value.line.startswith(f"pydsh: {bad}: malformed YAML")


def test_a_terminal_profile_without_the_terminal_app_is_refused_in_one_line(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydsh.kernel.profiles import reset_profile

    reset_profile("tui", "headless")
    composers: list[Any] = []
    monkeypatch.setattr("pydsh.apps.tui.launch", lambda profile, composed, args: composers.append(composed) or 0)
    assert cli.main(["tui"]) == 0
    with pytest.raises(LaunchFailed) as failed:
        composers[0]()
    assert failed.value.line == (
        "pydsh: profile tui has no tui-app row; recreate it with pydsh --profile tui --from-default-profile tui"
    )


def test_the_terminal_runs_in_the_same_app_runtime_as_every_app(monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal has a launcher of its own (it draws before the profile loads), yet like every app it runs
    with the collector paced (a full collection walked the whole screen's widgets mid-answer: 35 ms pauses)
    and threads switching every ``SWITCH_INTERVAL_S`` (the keyboard is read by a thread)."""
    import gc

    import pydsh.apps.tui as tui
    from pydsh.host import collector, launch

    seen: list[tuple[object, float, tuple[int, int, int]]] = []
    before = (sys.getswitchinterval(), gc.get_threshold())

    async def screen(loaded: Any, options: TuiOptions, *, paint_first: bool = False) -> int:
        seen.append((collector._pacer, sys.getswitchinterval(), gc.get_threshold()))
        return 3

    monkeypatch.setattr(tui, "run_tui", screen)
    monkeypatch.setattr(launch, "configure_logging", lambda: None)
    monkeypatch.setattr(collector, "_pacer", None)
    assert tui.launch("tui", lambda: [], []) == 3
    [(pacer, interval, thresholds)] = seen
    assert isinstance(pacer, collector.Pacer)
    assert interval == launch.SWITCH_INTERVAL_S
    assert thresholds[1:] == (collector.MIDDLE_EVERY, collector.FULL_EVERY)
    assert collector._pacer is None
    assert (sys.getswitchinterval(), gc.get_threshold()) == before
