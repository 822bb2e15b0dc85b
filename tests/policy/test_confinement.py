"""bash under bubblewrap: the confinement matrix, denial markers, escalation and the no-backend refusal (05 §5.5)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.contract.tools import ToolOutcome
from pydsh.policy.keys import APPROVAL
from pydsh.policy.sandbox import Bwrap
from tests.tools.harness import POLICY, Harness, harness, text_of

MARKER = "[sandbox: file access denied under {mode} mode]"
HINT = (
    "[sandbox: escalation available — retry this exact command once with sandbox_permissions "
    "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)


@pytest.fixture
def base() -> Iterator[Path]:
    """A workspace ``w`` and a sibling ``outside``, both outside every temp area."""
    path = Path(tempfile.mkdtemp(prefix="pydsh-bwrap-", dir=Path.home()))
    (path / "w").mkdir()
    (path / "outside").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def bwrap() -> None:
    """Skip (not fail) where bubblewrap cannot run, e.g. containers without user namespaces."""
    path, detail = await Bwrap().find()
    if path is None:
        pytest.skip(f"bubblewrap is not usable here: {detail or 'bwrap not on PATH'}")


async def world(base: Path, mode: str) -> Harness:
    plugins = [("tools", None), ("tool-bash", None), *POLICY[:2], ("permission", {"mode": mode})]
    return await harness(base / "w", plugins, startup=True)


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"description": "Run a sandbox probe", "command": command, **extra}


def denied(outcome: ToolOutcome, mode: str) -> None:
    text = text_of(outcome)
    assert not outcome.is_error
    assert text.endswith(f"\n{MARKER.format(mode=mode)}\n{HINT}\n[exit code: 1]"), text
    assert "Read-only file system" in text


async def test_workspace_write(bwrap: None, base: Path) -> None:
    h = await world(base, "workspace-write")
    try:
        assert await h.text("bash", bash("touch inside.txt")) == "(no output)"
        assert (base / "w" / "inside.txt").exists()
        denied(await h.call("bash", bash(f"echo x > {base / 'outside' / 'f'}")), "workspace-write")
        denied(await h.call("bash", bash("echo x > ../outside/f")), "workspace-write")
        denied(await h.call("bash", bash("echo x > /etc/pydsh-confinement-probe")), "workspace-write")
        assert list((base / "outside").iterdir()) == []
        assert not Path("/etc/pydsh-confinement-probe").exists()
        ephemeral = await h.text("bash", bash("echo x > /tmp/pydsh-ephemeral && cat /tmp/pydsh-ephemeral"))
        assert ephemeral == "x\n"
        assert not Path("/tmp/pydsh-ephemeral").exists()
        unmarked = await h.text("bash", bash("touch /etc/pydsh-probe 2>&1 || true"))
        assert "Read-only file system" in unmarked
        assert "[sandbox:" not in unmarked
    finally:
        await h.close()


async def test_read_only(bwrap: None, base: Path) -> None:
    h = await world(base, "read-only")
    try:
        outcome = await h.call("bash", bash("touch inside.txt"))
        denied(outcome, "read-only")
        assert text_of(outcome).startswith("[stderr]\ntouch: cannot touch 'inside.txt': Read-only file system\n")
        assert not (base / "w" / "inside.txt").exists()
    finally:
        await h.close()


async def test_same_mode_request_runs_without_asking(bwrap: None, base: Path) -> None:
    h = await world(base, "workspace-write")
    try:
        outcome = await h.call("bash", bash("touch same.txt", sandbox_permissions="workspace-write"))
        assert text_of(outcome) == "(no output)"
        assert h.events("approval/asked", "approval/decided") == []
    finally:
        await h.close()


async def test_danger_full_access_runs_unconfined(base: Path) -> None:
    h = await world(base, "danger-full-access")
    try:
        target = base / "outside" / "f"
        assert await h.text("bash", bash(f"echo x > {target}")) == "(no output)"
        assert target.read_text() == "x\n"
    finally:
        await h.close()


async def test_escalation(base: Path) -> None:
    h = await world(base, "workspace-write")
    try:
        target = base / "outside" / "f"
        request = bash(f"echo x > {target}", sandbox_permissions="danger-full-access", justification="test")
        unavailable = await h.call("bash", request)
        assert text_of(unavailable) == (
            'Error: sandbox escalation to "danger-full-access" requires approval, but no approval channel is available'
        )
        asked, decided = h.events("approval/asked", "approval/decided")
        assert asked["data"]["toolName"] == "bash"
        assert asked["data"]["reason"] == "escalate sandbox to danger-full-access: test"
        assert decided["data"]["outcome"] == "unavailable"
        missing = await h.call("bash", bash("true", sandbox_permissions="danger-full-access"))
        assert text_of(missing) == "Error: invalid escalation: sandbox_permissions requires a justification"
        answers = iter(["rejected", "allowed-once"])
        h.kernel.ctx.require(APPROVAL).add_answerer(h.agent.ctx, lambda r: next(answers))
        rejected = await h.call("bash", request)
        assert text_of(rejected) == (
            'Error: the user rejected escalating this command to "danger-full-access"; it stays denied, '
            "so stop and explain instead of working around it"
        )
        assert await h.text("bash", request) == "(no output)"
        assert target.read_text() == "x\n"
    finally:
        await h.close()


async def test_no_backend_refuses_and_runs_nothing(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = base / "bin"
    bin_dir.mkdir()
    bash_path = shutil.which("bash")
    assert bash_path is not None
    (bin_dir / "bash").symlink_to(bash_path)
    monkeypatch.setenv("PATH", str(bin_dir))
    h = await world(base, "workspace-write")
    try:
        outcome = await h.call("bash", bash("echo ran > ran.txt"))
        assert text_of(outcome) == (
            'Error: sandbox mode "workspace-write" is requested but no sandbox backend is usable on this host; '
            "refusing to run the command unconfined. Install bubblewrap (bwrap) — otherwise switch the consumer "
            "to danger-full-access."
        )
        assert outcome.error == {"name": "SandboxUnavailableError", "code": "SANDBOX_UNAVAILABLE"}
        assert not (base / "w" / "ran.txt").exists()
        h.session.append("sandbox/mode", {"mode": "danger-full-access"})
        assert await h.text("bash", bash("echo ran > ran.txt")) == "(no output)"
        assert (base / "w" / "ran.txt").exists()
    finally:
        await h.close()


async def test_failed_probe_refuses_with_the_runner_failure(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = base / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    h = await world(base, "read-only")
    try:
        outcome = await h.call("bash", bash("echo ran > ran.txt"))
        assert text_of(outcome).endswith(
            "to danger-full-access. Runner failure: bwrap: No permissions to create new namespace"
        )
        assert not (base / "w" / "ran.txt").exists()
    finally:
        await h.close()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_confined_bash_cannot_read_credentials_or_deny_listed_secrets(
    bwrap: None, base: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-SSH\n")
    (home / ".ssh" / "id_ed25519.pub").write_text("PUBLIC-KEY\n")
    (home / ".netrc").write_text("SECRET-NETRC\n")
    (home / ".config" / "gcloud").mkdir(parents=True)
    (home / ".config" / "gcloud" / "token").write_text("SECRET-GCLOUD\n")
    dsh = base / "dsh"
    dsh.mkdir()
    (dsh / "credentials.json").write_text('{"deepseek-official": "SECRET-CREDENTIAL"}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DSH_HOME", str(dsh))
    h = await world(base, mode)
    try:
        outcome = await h.call(
            "bash",
            bash(
                'cat ~/.ssh/id_ed25519 ~/.ssh/id_ed25519.pub ~/.netrc "$DSH_HOME/credentials.json"; '
                "ls ~/.config/gcloud; cat ~/.config/gcloud/token"
            ),
        )
    finally:
        await h.close()
    text = text_of(outcome)
    assert "SECRET" not in text, text
    assert "PUBLIC-KEY" in text
