"""The local backend: a pool of worker processes on this machine, each running one task at a time.

Worker processes (``python -m pydsh.batch.worker``) rather than tasks in this process, because a task
owns process-wide state — its ``DSH_HOME`` — and because a task that hangs or crashes can then be
killed or lost alone. A worker serves task after task (its imports and caches warm: a task's own
overhead drops from about a second to a few tens of milliseconds) and is replaced after
``TASKS_PER_WORKER`` tasks or when it dies. Each worker reads its jobs from a pipe whose closing —
the batch gone, even killed — stops the task it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import IO, Any

import pydsh
from pydsh.batch.worker import STOPPED, Job, Report

GRACE_S = 120.0
"""How long past its budgets a task may take (closing, writing the log) before its worker is killed."""
TASKS_PER_WORKER = 100
"""Tasks one worker serves before it is replaced (bounds what a long batch's workers accumulate)."""


class Worker:
    """One worker process and the number of tasks it served."""

    def __init__(self, proc: asyncio.subprocess.Process, log: IO[bytes]) -> None:
        self.proc = proc
        self.log = log
        self.served = 0

    async def finish(self) -> None:
        """Close its job pipe and wait for it to exit."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        await self.proc.wait()
        self.log.close()


class LocalBackend:
    """Runs each job on an idle worker (or a new one); ``stop`` interrupts them all, ``kill`` ends them."""

    name = "local"

    def __init__(self, out: Path) -> None:
        self.out = out
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self.stopping = False

    @property
    def capacity(self) -> int:
        """One task per CPU when ``--workers`` is not given."""
        return os.cpu_count() or 2

    async def run(self, job: Job, report: Report) -> dict[str, Any] | None:
        """The job's result record; ``None`` when it was stopped before it finished."""
        worker = self._idle.pop() if self._idle else await self._spawn()
        self._busy.add(worker)
        try:
            record = await self._exchange(worker, job, report)
        finally:
            self._busy.discard(worker)
        if record is not None and worker.proc.returncode is None and not self.stopping:
            worker.served += 1
            if worker.served < TASKS_PER_WORKER:
                self._idle.append(worker)
                return record
        await worker.finish()
        if record is None and not self.stopping and worker.proc.returncode != STOPPED:
            code = worker.proc.returncode
            return {"id": job.task["id"], "status": "error", "error": f"the worker exited with {code}; see worker.log"}
        return record

    async def _spawn(self) -> Worker:
        self.out.mkdir(parents=True, exist_ok=True)
        log = (self.out / "workers.log").open("ab")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pydsh.batch.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            cwd=self.out,
            env=worker_env(),
            start_new_session=True,
        )
        return Worker(proc, log)

    async def _exchange(self, worker: Worker, job: Job, report: Report) -> dict[str, Any] | None:
        proc = worker.proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job.to_json()) + "\n").encode())
        await proc.stdin.drain()
        try:
            return await asyncio.wait_for(read_messages(proc.stdout, report), hard_deadline(job))
        except TimeoutError:
            _kill_group(proc)
            await proc.wait()
            return {"id": job.task["id"], "status": "timeout", "error": "the task did not stop by itself; killed"}

    def stop(self) -> None:
        """Interrupt every running task (each writes its log and stays resumable)."""
        self.stopping = True
        for worker in self._busy:
            with contextlib.suppress(ProcessLookupError):
                worker.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """End every busy worker at once."""
        self.stopping = True
        for worker in self._busy:
            _kill_group(worker.proc)

    async def close(self) -> None:
        """Let the idle workers exit."""
        idle, self._idle = self._idle, []
        await asyncio.gather(*(worker.finish() for worker in idle))


async def read_messages(stream: asyncio.StreamReader, report: Report) -> dict[str, Any] | None:
    """Pass progress lines to ``report`` until the result line (``None``: the worker ended without one)."""
    while line := await stream.readline():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and isinstance(message.get("result"), dict):
            result: dict[str, Any] = message["result"]
            return result
        if isinstance(message, dict):
            report(message)
    return None


def hard_deadline(job: Job) -> float:
    """The longest a task may run: its time budget, each command's, and a grace period."""
    commands = len(job.task.get("setup", ())) + len(job.task.get("check", ()))
    return float(job.task.get("timeout") or job.timeout) + commands * job.command_timeout + GRACE_S


def worker_env() -> dict[str, str]:
    """The batch's environment, with this pydsh importable wherever the worker starts."""
    source = str(Path(pydsh.__file__).resolve().parents[1])
    paths = [source, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the worker and the processes it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
