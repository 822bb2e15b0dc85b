"""A task's workspace (a copied directory, a clone of a repository at a ref, or an empty directory) and
the setup and check commands run in it, confined like the agent's own ``bash`` where bubblewrap works."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from pydsh.batch.errors import BatchError
from pydsh.batch.tasks import Task

OUTPUT_TAIL = 4000
"""Characters of a command's output kept in its result (the end, where failures show)."""
SANDBOX_MODES = ("auto", "off", "required")
READ_REST_S = 5.0
"""How long output still arriving after a command ended (a process it left behind) is read."""


@dataclass(frozen=True)
class CommandOutcome:
    """How one setup or check command ended: its exit code (``None`` when it was stopped) and output tail."""

    command: str
    exit_code: int | None
    output: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def summary(self) -> str:
        """One line: the command, how it ended and its last output line."""
        ended = "timed out" if self.timed_out else f"exit {self.exit_code}"
        last = next((line.strip() for line in reversed(self.output.splitlines()) if line.strip()), "")
        return f"{self.command!r} failed ({ended})" + (f": {last}" if last else "")


async def prepare_workspace(task: Task, dest: Path) -> None:
    """A fresh workspace for ``task`` at ``dest`` (anything there before is removed); ``BatchError`` if
    the source is missing or the clone fails."""
    if dest.exists():
        await asyncio.to_thread(shutil.rmtree, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if task.workspace is not None:
        await asyncio.to_thread(copy_directory, Path(task.workspace), dest)
    elif task.repo is not None:
        await clone(task.repo, task.ref, dest)
    else:
        dest.mkdir()


def copy_directory(source: Path, dest: Path) -> None:
    """Copy ``source`` to ``dest`` keeping symlinks as links; ``BatchError`` when it is not a directory."""
    if not source.is_dir():
        state = "is not a directory" if source.exists() else "does not exist"
        raise BatchError(f"workspace {source} {state}")
    try:
        shutil.copytree(source, dest, symlinks=True)
    except (OSError, shutil.Error) as exc:
        raise BatchError(f"cannot copy workspace {source}: {exc}") from None


async def clone(repo: str, ref: str | None, dest: Path) -> None:
    """Clone ``repo`` into ``dest`` and check out ``ref`` detached; the source repository is only read."""
    checkout = ref or "HEAD"
    steps = [
        ("git clone", ["git", "clone", "--quiet", "--no-checkout", repo, str(dest)]),
        (f"git checkout {checkout}", ["git", "-C", str(dest), "checkout", "--quiet", "--detach", checkout]),
    ]
    for label, argv in steps:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, err = await proc.communicate()
        if proc.returncode != 0:
            lines = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
            reason = lines[-1].strip() if lines else f"exit {proc.returncode}"
            raise BatchError(f"{label} of {repo} failed: {reason}")


class Confinement:
    """How setup and check commands are wrapped: bubblewrap's ``workspace-write`` profile where usable."""

    def __init__(self, mode: str = "auto") -> None:
        if mode not in SANDBOX_MODES:
            raise BatchError(f"sandbox mode {mode!r} is not one of {', '.join(SANDBOX_MODES)}")
        self.mode = mode

    async def wrap(self, workspace: Path, argv: list[str]) -> list[str]:
        """``argv`` confined to write only ``workspace`` (and a private /tmp); unconfined with ``off``, or
        with ``auto`` where bubblewrap is unusable; ``BatchError`` with ``required`` then."""
        if self.mode == "off":
            return argv
        from pydsh.policy.sandbox import Bwrap, bwrap_profile
        from pydsh.policy.secrets import secret_masks

        path, detail = await Bwrap().find()
        if path is None:
            if self.mode == "required":
                raise BatchError(f"bubblewrap is not usable here{': ' + detail if detail else ''}")
            return argv
        root = str(workspace.resolve())
        return [path, *bwrap_profile("workspace-write", root), *secret_masks(), "--chdir", root, "--", *argv]


async def run_command(command: str, workspace: Path, confinement: Confinement, timeout: float) -> CommandOutcome:
    """Run ``command`` with ``sh -c`` in ``workspace``; output merged, stopped after ``timeout`` seconds."""
    argv = await confinement.wrap(workspace, ["sh", "-c", command])
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=workspace,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    output = bytearray()
    reader = asyncio.ensure_future(_collect(proc.stdout, output))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout)
    except TimeoutError:
        timed_out = True
        _kill_group(proc)
    finally:
        if proc.returncode is None:
            _kill_group(proc)
        await proc.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), READ_REST_S)
        reader.cancel()
    return CommandOutcome(command, None if timed_out else proc.returncode, _tail(bytes(output)), timed_out)


async def _collect(stream: asyncio.StreamReader, output: bytearray) -> None:
    """Read ``stream`` to its end into ``output``, keeping only its last ``OUTPUT_TAIL`` bytes (and some)."""
    while data := await stream.read(65536):
        output += data
        if len(output) > 4 * OUTPUT_TAIL:
            del output[: -2 * OUTPUT_TAIL]


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Stop the command and everything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]


async def run_commands(
    commands: tuple[str, ...], workspace: Path, confinement: Confinement, timeout: float
) -> CommandOutcome | None:
    """Run ``commands`` in order until one fails; the failing one's outcome (``None``: none ran) or the last."""
    outcome = None
    for command in commands:
        outcome = await run_command(command, workspace, confinement, timeout)
        if not outcome.ok:
            break
    return outcome
