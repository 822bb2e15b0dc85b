"""Workspaces (copy, clone at a ref, empty) and the setup/check commands run in them, confined."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pydsh.batch.errors import BatchError
from pydsh.batch.tasks import Task
from pydsh.batch.workspace import Confinement, prepare_workspace, run_command
from pydsh.policy.sandbox import Bwrap


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    git(path, "config", "user.email", "t@example.org")
    git(path, "config", "user.name", "t")
    (path / "f.txt").write_text("one\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "one")
    git(path, "tag", "v1")
    (path / "f.txt").write_text("two\n")
    git(path, "commit", "-qam", "two")
    return path


async def test_a_repository_is_cloned_at_its_ref_and_left_untouched(repo: Path, tmp_path: Path) -> None:
    await prepare_workspace(Task("a", "p", repo=str(repo), ref="v1"), tmp_path / "ws")
    assert (tmp_path / "ws" / "f.txt").read_text() == "one\n"
    await prepare_workspace(Task("a", "p", repo=str(repo)), tmp_path / "ws")
    assert (tmp_path / "ws" / "f.txt").read_text() == "two\n"
    assert git(repo, "worktree", "list").count("\n") == 1 and git(repo, "status", "--short") == ""
    with pytest.raises(BatchError, match=rf"^git checkout nope of {repo} failed: fatal: "):
        await prepare_workspace(Task("a", "p", repo=str(repo), ref="nope"), tmp_path / "ws")


async def test_a_directory_is_copied_fresh_and_a_task_without_one_starts_empty(tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "m.py").write_text("x = 1\n")
    (source / "link").symlink_to("pkg")
    dest = tmp_path / "ws"
    await prepare_workspace(Task("a", "p"), dest)
    (dest / "stale").write_text("left from before")
    await prepare_workspace(Task("a", "p", workspace=str(source)), dest)
    assert sorted(p.name for p in dest.iterdir()) == ["link", "pkg"]
    assert (dest / "link").is_symlink()
    with pytest.raises(BatchError, match=f"^workspace {source / 'pkg' / 'm.py'} is not a directory$"):
        await prepare_workspace(Task("a", "p", workspace=str(source / "pkg" / "m.py")), dest)


async def test_commands_write_their_workspace_and_a_private_tmp_unless_confinement_is_off(tmp_path: Path) -> None:
    path, detail = await Bwrap().find()
    if path is None:
        pytest.skip(f"bubblewrap is not usable here: {detail or 'bwrap not on PATH'}")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    command = f"echo in > inside.txt && echo out > {outside} && cat {outside}"
    confined = await run_command(command, workspace, Confinement("auto"), 30)
    assert confined.ok and confined.output == "out\n"
    assert (workspace / "inside.txt").exists() and not outside.exists()
    system = await run_command("echo x > /usr/pydsh-batch-probe", workspace, Confinement("required"), 30)
    assert not system.ok and "Read-only file system" in system.summary()
    free = await run_command(command, workspace, Confinement("off"), 30)
    assert free.ok and outside.read_text() == "out\n"


async def test_a_command_past_its_bound_is_stopped(tmp_path: Path) -> None:
    outcome = await run_command("echo started; sleep 30", tmp_path, Confinement("off"), 0.5)
    assert (outcome.exit_code, outcome.timed_out, outcome.summary()) == (
        None,
        True,
        "'echo started; sleep 30' failed (timed out): started",
    )
    with pytest.raises(BatchError, match="sandbox mode 'on' is not one of auto, off, required"):
        Confinement("on")
