"""The local backend: a pool of worker processes on this machine, one process per task.

A fresh process per task (``python -m pydsh.batch.worker``) because a task owns process-wide state —
its ``DSH_HOME`` — and because a task that hangs or crashes can then be stopped or lost alone. The
batch bounds how many run at once; each worker reads its job from a pipe whose closing (the batch
gone, even killed) tells it to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pydsh
from pydsh.batch.worker import Job, Report

GRACE_S = 120.0
"""How long past its budgets a worker may take (closing, writing the log) before it is killed."""
STOPPED = 3
"""The worker's exit code after it was told to stop: the task stays unfinished (resumable)."""


class LocalBackend:
    """Runs each job in its own worker process; ``stop`` interrupts them all, ``kill`` ends them."""

    name = "local"

    def __init__(self) -> None:
        self._running: set[asyncio.subprocess.Process] = set()
        self.stopping = False

    @property
    def capacity(self) -> int:
        """One task per CPU when ``--workers`` is not given."""
        return os.cpu_count() or 2

    async def run(self, job: Job, report: Report) -> dict[str, Any] | None:
        """The job's result record; ``None`` when it was stopped before it finished."""
        root = Path(job.root)
        root.mkdir(parents=True, exist_ok=True)
        with (root / "worker.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "pydsh.batch.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                cwd=root,
                env=worker_env(),
                start_new_session=True,
            )
            self._running.add(proc)
            try:
                return await self._exchange(proc, job, report)
            finally:
                self._running.discard(proc)

    async def _exchange(self, proc: asyncio.subprocess.Process, job: Job, report: Report) -> dict[str, Any] | None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job.to_json()) + "\n").encode())
        await proc.stdin.drain()
        found: list[dict[str, Any]] = []
        try:
            await asyncio.wait_for(read_messages(proc.stdout, report, found), hard_deadline(job))
        except TimeoutError:
            _kill_group(proc)
            await proc.wait()
            return {"id": job.task["id"], "status": "timeout", "error": "the worker did not stop by itself; killed"}
        finally:
            proc.stdin.close()
        code = await proc.wait()
        if found:
            return found[-1]
        if self.stopping or code == STOPPED:
            return None
        return {"id": job.task["id"], "status": "error", "error": f"the worker exited with {code}; see worker.log"}

    def stop(self) -> None:
        """Interrupt every running task (each writes its log and stays resumable)."""
        self.stopping = True
        for proc in self._running:
            _signal(proc, signal.SIGTERM)

    def kill(self) -> None:
        """End every worker at once."""
        self.stopping = True
        for proc in self._running:
            _kill_group(proc)

    async def close(self) -> None:
        """Nothing to release: every worker has exited when its ``run`` returned."""


async def read_messages(stream: asyncio.StreamReader, report: Report, found: list[dict[str, Any]]) -> None:
    """Pass progress lines to ``report`` and keep the result line, until the worker closes its output."""
    while line := await stream.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("result"), dict):
            found.append(message["result"])
        elif isinstance(message, dict):
            report(message)


def hard_deadline(job: Job) -> float:
    """The longest a worker may run: its time budget, each command's, and a grace period."""
    commands = len(job.task.get("setup", ())) + len(job.task.get("check", ()))
    return float(job.task.get("timeout") or job.timeout) + commands * job.command_timeout + GRACE_S


def worker_env() -> dict[str, str]:
    """The batch's environment, with this pydsh importable wherever the worker starts."""
    source = str(Path(pydsh.__file__).resolve().parents[1])
    paths = [source, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _signal(proc: asyncio.subprocess.Process, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signum)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the worker and the processes it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
