"""One task, start to result: workspace and setup, the agent's run within its budgets, the check.

The same code runs every task of every backend: ``python -m pydsh.batch.worker`` (the local pool
starts one per task; the job arrives as one JSON line on stdin, progress and the result leave as JSON
lines on stdout) or :func:`run_task` called directly (a Ray task). The agent runs through the
application layer (``pydsh.host``), in its own ``DSH_HOME`` shard; a task found half done — its
workspace set up, its session interrupted — is resumed from its log rather than started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydsh.batch.errors import BatchError
from pydsh.batch.tasks import Task, task_from_json
from pydsh.batch.workspace import CommandOutcome, Confinement, prepare_workspace, run_commands
from pydsh.host import Agent, AgentSpec, Host, HostError
from pydsh.session.hooks import SESSION_EVENT

CONTINUE = "The run was interrupted. Continue the task from where it stopped."
"""The one message a resumed task's model gets: its interrupted turn is closed in the log, and a new
turn needs a prompt (see the README's "Model experience")."""
HOME_CARRIED = ("patch.yml", "cordis.patch.yml", "credentials.json", "AGENTS.md", "mcp.json", "skills")
"""What a task's ``DSH_HOME`` shard copies from the user's home (with the profile's own directory), so
the tasks run with the user's patches, keys and instructions."""
Report = Callable[[dict[str, Any]], None]
LOCK_WAIT_S = 60.0
LOCK_POLL_S = 0.25


@dataclass
class Job:
    """Everything a worker needs for one task; plain JSON, so it crosses a pipe or a Ray call."""

    task: dict[str, Any]
    root: str
    """The task's directory: ``workspace/``, ``home/`` (its ``DSH_HOME``), ``state.json``."""
    profile: str = "embed"
    patches: list[str] = field(default_factory=list)
    gate: dict[str, Any] | None = None
    """The ``batch-route-gate`` row's config (``None``: no shared pause)."""
    timeout: float = 1800.0
    command_timeout: float = 600.0
    sandbox: str = "auto"
    user_home: str | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Job:
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Paths:
    """Where one task keeps its things."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.workspace = self.root / "workspace"
        self.home = self.root / "home"
        self.state = self.root / "state.json"

    def read_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def write_state(self, state: dict[str, Any]) -> None:
        spare = self.state.with_name("state.json.new")
        spare.write_text(json.dumps(state))
        spare.replace(self.state)

    def session_log(self, session_id: str) -> str | None:
        found = sorted((self.home / "sessions").glob(f"*/{session_id}/session.v4.jsonl*"))
        return str(found[0]) if found else None


async def run_task(job: Job, report: Report = lambda _progress: None) -> dict[str, Any]:
    """Run ``job``'s task to its result record (``results.jsonl``'s line); every failure is the record's
    one-line ``error``, never an exception (but cancellation, which leaves the task resumable)."""
    started = time.monotonic()
    cpu = time.process_time()
    task = task_from_json(job.task)
    paths = Paths(job.root)
    paths.root.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"id": task.id, "sessionId": task.id, "workspace": str(paths.workspace)}
    confinement = Confinement(job.sandbox)
    try:
        await ensure_prepared(task, job, paths, confinement, report)
        report({"state": "running"})
        record |= await run_agent(task, job, paths, report)
    except BatchError as exc:
        record |= {"status": "error", "error": str(exc)}
    if record["status"] != "error" or "finishReason" in record:
        report({"state": "checking"})
        record |= await check(task, paths, confinement, job.command_timeout)
    record["passed"] = record.get("check") == "passed" or (not task.check and record["status"] == "completed")
    record["log"] = paths.session_log(task.id)
    record["wallS"] = round(time.monotonic() - started, 3)
    record["cpuS"] = round(time.process_time() - cpu, 3)
    record["peakRssMB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return record


async def ensure_prepared(task: Task, job: Job, paths: Paths, confinement: Confinement, report: Report) -> None:
    """The workspace and home shard, made once: a task interrupted during setup starts it over."""
    state = paths.read_state()
    if state.get("prepared"):
        return
    report({"state": "setup"})
    await prepare_workspace(task, paths.workspace)
    seed_home(paths.home, job.user_home, job.profile)
    failed = await run_commands(task.setup, paths.workspace, confinement, job.command_timeout)
    if failed is not None and not failed.ok:
        raise BatchError(f"setup command {failed.summary()}")
    paths.write_state({**state, "prepared": True})


def seed_home(shard: Path, user_home: str | None, profile: str) -> None:
    """A fresh ``DSH_HOME`` shard carrying the user's patch layers, keys and instructions."""
    if shard.exists():
        shutil.rmtree(shard)
    shard.mkdir(parents=True, mode=0o700)
    if user_home is None:
        return
    source = Path(user_home)
    for name in (*HOME_CARRIED, f"profiles/{profile}"):
        item = source / name
        target = shard / name
        if item.is_dir():
            shutil.copytree(item, target, symlinks=True)
        elif item.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, target)


def host_for(job: Job, paths: Paths) -> Host:
    """The task's host: the batch's profile and patches, plus the shared route gate, in the task's shard."""
    patches: list[Any] = []
    if job.gate is not None:
        row = {"id": "batch-route-gate", "name": "pydsh.batch.gate", "config": job.gate}
        patches.append([{"insert": [row]}])
    patches += job.patches
    return Host(job.profile, patches=patches, cwd=paths.workspace, dsh_home=paths.home)


async def run_agent(task: Task, job: Job, paths: Paths, report: Report) -> dict[str, Any]:
    """Open (or resume) the task's session, run it within its budgets, and read its outcome."""
    try:
        async with host_for(job, paths) as host:
            agent = await open_session(host, task, paths)
            return await drive(agent, task, job.timeout, report)
    except HostError as exc:
        raise BatchError(str(exc).splitlines()[0]) from None


async def open_session(host: Host, task: Task, paths: Paths) -> Agent:
    """The task's session: resumed when its log exists, else created in the task's workspace.

    A log another process still holds (a worker of a batch killed a moment ago, closing it) is waited
    for, up to ``LOCK_WAIT_S``.
    """
    if paths.session_log(task.id) is None:
        spec = AgentSpec(cwd=str(paths.workspace), provider=task.provider, model=task.model, preset=task.preset)
        return await host.create(spec, task.id)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return await host.resume(task.id)
        except HostError as exc:
            if exc.code != "owned_elsewhere" or time.monotonic() > deadline:
                raise
        await asyncio.sleep(LOCK_POLL_S)


def prompt_id(task: Task) -> str:
    return f"batch-{task.id}"


def window_start(events: list[Any], message_id: str) -> int | None:
    """The seq of the splice that queued ``message_id`` (where the task's run starts), if logged."""
    for event in events:
        if event["type"] == "agent/inbox/spliced" and any(
            m.get("id") == message_id for m in event["data"].get("inserted", ())
        ):
            return int(event["seq"])
    return None


async def drive(agent: Agent, task: Task, default_timeout: float, report: Report) -> dict[str, Any]:
    """Submit what the session still needs and wait for it within the time and token budgets."""
    events = agent.events
    start = window_start(events, prompt_id(task))
    budget_s = task.timeout or default_timeout
    watch = Budget(agent, task.tokens, report)
    if start is None:
        start = (await agent.submit(task.prompt, message_id=prompt_id(task))).seq
    elif not finished(events[start:]):
        attempt = sum(1 for e in events if e["type"] == "turn/start")
        budget_s -= agent_seconds(events[start:])
        if budget_s > 0:
            await agent.submit(CONTINUE, message_id=f"{prompt_id(task)}-continue-{attempt}")
    try:
        status = await watch.wait(budget_s)
    finally:
        watch.stop()
    return outcome(agent.result(start), status)


def finished(events: list[Any]) -> bool:
    """Whether the window's last turn ended by itself (not interrupted or aborted)."""
    ends = [e for e in events if e["type"] == "turn/end"]
    return bool(ends) and ends[-1]["data"]["reason"]["kind"] not in ("interrupted", "aborted")


def agent_seconds(events: list[Any]) -> float:
    """Time the task's turns took so far, from the log's own clock (what a resumed task has used)."""
    total = 0.0
    opened: float | None = None
    for event in events:
        if event["type"] == "turn/start":
            opened = event["time"]
        elif event["type"] == "turn/end" and opened is not None:
            total += (event["time"] - opened) / 1000
            opened = None
    return total


class Budget:
    """Watches a running task: its steps for the progress display, its tokens against the budget."""

    def __init__(self, agent: Agent, tokens: int | None, report: Report) -> None:
        self.agent = agent
        self.limit = tokens
        self.report = report
        self.used = total_tokens(agent.result(0).usage)
        self.over = asyncio.Event()
        self._remove = agent.host.ctx.on(SESSION_EVENT, self._event)

    def _event(self, session: Any, event: Any) -> None:
        if session is not self.agent.session:
            return
        if event["type"] == "step/start":
            self.report({"state": "running", "step": event["data"].get("step"), "tokens": self.used})
        elif event["type"] == "assistant/message":
            self.used += total_tokens(event["data"].get("usage") or {})
            if self.limit is not None and self.used >= self.limit and not self.over.is_set():
                self.over.set()
                self.agent.cancel()

    async def wait(self, seconds: float) -> str:
        """``completed`` once settled (whatever the turn's end); ``timeout`` or ``over_budget`` after
        stopping the turn."""
        if seconds > 0 and not self.over.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.agent.settle(), seconds)
                return "over_budget" if self.over.is_set() else "completed"
        self.agent.cancel()
        await self.agent.live.when_idle()
        return "over_budget" if self.over.is_set() else "timeout"

    def stop(self) -> None:
        self._remove()


def total_tokens(usage: Mapping[str, int]) -> int:
    """Every token a call was billed for: its reported total, else the sum of its buckets."""
    if "totalTokens" in usage:
        return int(usage["totalTokens"])
    return sum(int(v) for k, v in usage.items() if k.endswith("Tokens"))


def outcome(result: Any, status: str) -> dict[str, Any]:
    """The record fields of the agent's run."""
    usage = dict(result.usage)
    usage.setdefault("totalTokens", total_tokens(usage))
    fields: dict[str, Any] = {
        "status": status,
        "finishReason": result.finish_reason,
        "finalAnswer": result.final_response,
        "tokens": usage,
        "route": last_route(result.events),
    }
    if status == "completed" and result.finish_reason != "completed":
        fields["status"] = "error"
        error = result.error or {}
        fields["error"] = f"the turn ended {result.finish_reason}" + (
            f": {error.get('code')}: {error.get('message')}" if error else ""
        )
    return fields


def last_route(events: list[Any]) -> str | None:
    """``provider/model`` of the run's last model request."""
    for event in reversed(events):
        if event["type"] == "request/header":
            config = event["data"].get("header", {}).get("config", {})
            return f"{config.get('provider')}/{config.get('model')}"
    return None


async def check(task: Task, paths: Paths, confinement: Confinement, timeout: float) -> dict[str, Any]:
    """Run the task's check commands in its workspace: ``passed``, ``failed`` or ``None`` (no check)."""
    if not task.check:
        return {"check": None}
    if not paths.workspace.is_dir():
        return {"check": "failed", "checkOutput": "the workspace is gone"}
    outcome: CommandOutcome | None = await run_commands(task.check, paths.workspace, confinement, timeout)
    assert outcome is not None
    return {
        "check": "passed" if outcome.ok else "failed",
        "checkExit": outcome.exit_code,
        "checkOutput": outcome.output,
    }


# -- the worker process ----------------------------------------------------------------------------


def main() -> int:
    """Serve jobs from stdin, one at a time, until stdin closes: progress and each result go out as JSON
    lines on the original stdout, the task's own output to its ``worker.log``.

    SIGTERM, SIGINT, or stdin closing while a task runs (the batch gone, even killed) stop the task
    cleanly — the turn interrupted, the log written, no result — and end the worker with exit code 3;
    the batch runs that task again, resumed, next time.
    """
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="pydsh: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pydsh.batch").setLevel(logging.INFO)

    def emit(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False) + "\n")
        out.flush()

    return asyncio.run(serve(emit))


async def serve(emit: Report) -> int:
    """Run each job stdin brings; 0 once stdin closes between jobs, 3 when told to stop during one."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    threading.Thread(target=read_lines, args=(loop, lines), name="batch-jobs", daemon=True).start()
    while True:
        line = await first(lines.get(), stop.wait())
        if not isinstance(line, bytes):
            return 0
        job = Job.of(json.loads(line))
        with task_log(Path(job.root)):
            work = asyncio.ensure_future(run_task(job, emit))
            await first(work, lines.get(), stop.wait(), keep=work)
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                return STOPPED
        emit({"result": work.result()})


STOPPED = 3


async def first(*waits: Any, keep: Any = None) -> Any:
    """The result of whichever of ``waits`` finishes first; the others are cancelled (but ``keep``)."""
    futures = [asyncio.ensure_future(w) for w in waits]
    done, pending = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    for future in pending:
        if future is not keep:
            future.cancel()
    winner = next(f for f in futures if f in done)
    return winner.result() if not winner.cancelled() else None


def read_lines(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[bytes | None]) -> None:
    """Feed stdin's lines to ``lines`` (``None`` at its end); raw reads, so no lock outlives the process."""
    pending = b""
    while chunk := os.read(0, 65536):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            loop.call_soon_threadsafe(lines.put_nowait, line)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(lines.put_nowait, None)


@contextlib.contextmanager
def task_log(root: Path) -> Iterator[None]:
    """Send the process's stderr (logs, warnings) to the task's ``worker.log`` while it runs."""
    root.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    sys.stderr.flush()
    with (root / "worker.log").open("ab") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


if __name__ == "__main__":
    sys.exit(main())
