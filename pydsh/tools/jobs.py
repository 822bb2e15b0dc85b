"""Background jobs: the ``jobs`` registry service and the ``job_output`` / ``job_list`` / ``job_kill`` tools.

A producer (the bash tool) creates a job for every run so it can move to the background; only
backgrounded jobs are listed and logged (``job/registered``, ``job/settled``). When one settles
without having been killed, its agent gets a completion notice (spec 05 §4.4–4.5). Each agent
keeps its ``FINISHED_KEPT`` most recent finished jobs; older ones (those already read first) are
forgotten with their output tails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_DISPOSED
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.session.log import now_ms
from pydsh.tools.files import owner_of
from pydsh.tools.keys import JOBS
from pydsh.tools.schema import compact_json

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.session.log import Session
    from pydsh.tools.process import Capture


log = logging.getLogger("pydsh.jobs")

SHUTDOWN_WAIT_S = 3.0
FINISHED_KEPT = 16
JOB_ID = {"type": "string", "description": "The job id reported by the tool that started the background work."}


def status_line(status: str, detail: str | None) -> str:
    return f"[status: {status}, {detail}]" if detail else f"[status: {status}]"


@dataclass(eq=False)
class Job:
    """One unit of background work and the output it produced."""

    id: str
    kind: str
    label: str
    owner: str
    agent: Agent | None
    session: Session | None
    started_at: int
    tool_call: dict[str, str]
    stop: Callable[[], None]
    stdout: Capture
    stderr: Capture
    status: str = "running"
    detail: str | None = None
    kill_reason: str | None = None
    backgrounded: bool = False
    finished: dict[str, Any] | None = None
    read_out: int = 0
    read_err: int = 0
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.status in ("running", "stopping")

    def status_line(self) -> str:
        return status_line(self.status, self.detail)

    def mark_read(self) -> None:
        self.read_out = self.stdout.total
        self.read_err = self.stderr.total

    @property
    def unread(self) -> bool:
        """Whether output arrived since the last ``job_output`` read."""
        return self.read_out < self.stdout.total or self.read_err < self.stderr.total

    def record(self) -> dict[str, Any]:
        """The ``job/registered`` payload."""
        return {
            "jobId": self.id,
            "owner": self.owner,
            "kind": self.kind,
            "label": self.label,
            "startedAt": self.started_at,
            "toolCall": self.tool_call,
        }


class JobRegistry:
    """The ``jobs`` service: background jobs per owner (agent), their settlement and notices."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}

    def create(
        self, exec: ToolExec, kind: str, label: str, *, stop: Callable[[], None], stdout: Capture, stderr: Capture
    ) -> Job:
        """A job for work a tool call just started; it is listed only once :meth:`background` moves it."""
        return Job(
            id=f"{kind}-{secrets.token_hex(8)}",
            kind=kind,
            label=label,
            owner=owner_of(exec),
            agent=exec.agent,
            session=exec.session,
            started_at=now_ms(),
            tool_call={"callId": exec.call_id, "rootCallId": exec.root_call_id or exec.call_id},
            stop=stop,
            stdout=stdout,
            stderr=stderr,
        )

    def background(self, job: Job) -> None:
        """List ``job`` and log ``job/registered`` (and its settlement at once if it already ended)."""
        job.backgrounded = True
        self._jobs[job.id] = job
        self._append(job, "job/registered", job.record())
        if job.finished is not None:
            self._announce(job)
            self._prune(job)

    def settle(self, job: Job, status: str, detail: str | None, cause: dict[str, Any]) -> None:
        """Record how ``job`` ended; a backgrounded job is logged and (unless killed) announced."""
        job.status = status
        job.detail = detail
        job.finished = {
            "finishedAt": now_ms(),
            "status": status,
            "cause": cause,
            "producerReported": cause.get("kind") == "exit",
        }
        if detail:
            job.finished["detail"] = detail
        job.settled.set()
        if job.backgrounded:
            self._announce(job)
            self._prune(job)

    def _prune(self, settled: Job) -> None:
        """Keep ``FINISHED_KEPT`` finished jobs of ``settled``'s owner, ``settled`` among them.

        Jobs whose output was read go first, then the earliest.
        """
        older = [job for job in self.owned(settled.owner) if job.finished is not None and job is not settled]
        excess = len(older) + 1 - FINISHED_KEPT
        if excess > 0:
            older.sort(key=lambda job: job.unread)
            for job in older[:excess]:
                del self._jobs[job.id]

    def _announce(self, job: Job) -> None:
        assert job.finished is not None
        self._append(job, "job/settled", {**job.record(), **job.finished})
        if job.status == "killed" or job.agent is None:
            return
        line = job.status_line()
        text = f"background job {job.id} ({job.kind}: {job.label}) finished {line}. Read its output with job_output."
        notice = user_message(
            text, {"kind": "tool-jobs", "form": "notice", "summary": f"{job.kind} {job.label} {line}"}
        )
        if job.agent.status == "idle":
            job.agent.followup(notice)
        else:
            job.agent.inject(notice)

    @staticmethod
    def _append(job: Job, event_type: str, data: dict[str, Any]) -> None:
        if job.session is None:
            return
        try:
            job.session.append(event_type, data)
        except Exception:
            log.warning("could not log %s for %s", event_type, job.id, exc_info=True)

    def get(self, owner: str, job_id: str) -> Job | None:
        job = self._jobs.get(job_id)
        return job if job is not None and job.owner == owner else None

    def owned(self, owner: str) -> list[Job]:
        return [job for job in self._jobs.values() if job.owner == owner]

    def kill(self, job: Job, reason: str | None = None) -> None:
        """Ask ``job``'s producer to stop; it settles as ``killed`` and announces nothing."""
        if not job.running:
            return
        job.status = "stopping"
        job.kill_reason = reason
        job.stop()

    def stop_all(self, owner: str | None = None) -> list[Job]:
        """Stop every running job (of ``owner``), as on agent disposal; returns the stopped jobs."""
        stopped = [job for job in self._jobs.values() if job.running and (owner is None or job.owner == owner)]
        for job in stopped:
            self.kill(job, "shutdown")
        return stopped

    def forget(self, owner: str) -> None:
        """Stop and drop every job of a disposed owner."""
        self.stop_all(owner)
        for job in self.owned(owner):
            del self._jobs[job.id]

    async def shutdown(self) -> None:
        """Stop every running job and give them the kill grace period to settle."""
        stopped = self.stop_all()
        if stopped:
            waits = [asyncio.ensure_future(job.settled.wait()) for job in stopped]
            _done, pending = await asyncio.wait(waits, timeout=SHUTDOWN_WAIT_S)
            for waiter in pending:
                waiter.cancel()


name = "jobs"


def apply(ctx: Context, config: None) -> None:
    """Provide ``jobs``; running jobs are stopped with their agent and when the registry unloads."""
    registry = JobRegistry()
    ctx.provide(JOBS, registry)
    ctx.on(AGENT_DISPOSED, lambda payload: registry.forget(payload["agent"].id), global_=True)
    ctx.effect(lambda: registry.shutdown)


# -- tools ---------------------------------------------------------------------------------------

JOB_OUTPUT = {
    "type": "object",
    "properties": {
        "job_id": JOB_ID,
        "wait": {
            "type": "boolean",
            "description": "Wait until the job finishes or the timeout passes; a wait that times out leaves the "
            "job running. Default false.",
        },
        "timeout_ms": {
            "type": "number",
            "description": "Longest wait in milliseconds when wait is true; the configured value is both the "
            "default and the upper bound.",
        },
    },
    "required": ["job_id"],
}
JOB_LIST: dict[str, Any] = {"type": "object", "properties": {}}
JOB_KILL = {
    "type": "object",
    "properties": {
        "job_id": JOB_ID,
        "reason": {"type": "string", "description": "Optional brief reason; it is logged and passed on to the job."},
    },
    "required": ["job_id"],
}
GUIDANCE = (
    "Keep track of the id of every background job you start. A message in the session tells you when a job "
    "finishes, so do not poll or sleep waiting for one; carry on with independent steps and do not redo what a "
    "running job is doing. Before your final answer, collect each job that still matters with job_output (use "
    "wait: true only when you truly cannot continue without it) and stop jobs that no longer matter with job_kill."
)


class JobToolsConfig(BaseModel):
    """``defaultWaitMs``/``maxWaitMs``: the default and the cap of ``job_output``'s ``timeout_ms``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    defaultWaitMs: int = 30000
    maxWaitMs: int = 600000


class JobTools:
    """Bodies of the three job tools."""

    def __init__(self, ctx: Context, config: JobToolsConfig) -> None:
        self.ctx = ctx
        self.config = config

    def _job(self, args: dict[str, Any], exec: ToolExec) -> Job:
        job_id: str = args["job_id"]
        if not job_id:
            raise ToolError('invalid job_id: expected a non-empty string, got ""')
        job = self.ctx.require(JOBS).get(owner_of(exec), job_id)
        if job is None:
            raise ToolError(f"unknown job {job_id}")
        return job

    async def output(self, args: dict[str, Any], exec: ToolExec) -> str:
        job = self._job(args, exec)
        if args.get("wait") is True and job.running:
            timeout = args.get("timeout_ms", self.config.defaultWaitMs)
            if not timeout > 0:
                raise ToolError(f"invalid timeout_ms: expected a positive number, got {compact_json(timeout)}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.settled.wait(), min(timeout, self.config.maxWaitMs) / 1000)
        out, out_dropped = job.stdout.since(job.read_out)
        err, err_dropped = job.stderr.since(job.read_err)
        job.mark_read()
        body = out
        if err:
            if body and not body.endswith("\n"):
                body += "\n"
            body += f"[stderr]\n{err}"
        text = body or "(no new output)"
        if out_dropped or err_dropped:
            paths = ", ".join(p for p in (job.stdout.path, job.stderr.path) if p) or "(unavailable)"
            text = f"[some output was dropped from memory; full output: {paths}]\n{text}"
        if not text.endswith("\n"):
            text += "\n"
        if job.status == "killed" and job.kill_reason:
            text += f"[stopped: {job.kill_reason}]\n"
        return text + job.status_line()

    def list_jobs(self, args: dict[str, Any], exec: ToolExec) -> str:
        jobs = self.ctx.require(JOBS).owned(owner_of(exec))
        if not jobs:
            return "(no background jobs)"
        return "\n".join(f"{j.id} [{j.kind}] {j.status} — {' '.join(j.label.split())}" for j in jobs)

    def kill(self, args: dict[str, Any], exec: ToolExec) -> str:
        job = self._job(args, exec)
        if not job.running:
            return f"job {job.id} had already finished {job.status_line()}"
        self.ctx.require(JOBS).kill(job, args.get("reason"))
        return f"requested cancellation of job {job.id}"


def tools_plugin(ctx: Context, config: JobToolsConfig) -> None:
    """Register ``job_output``, ``job_list``, ``job_kill`` and the ``tool:jobs`` guidance."""
    tools = ctx.require(TOOLS)
    body = JobTools(ctx, config)
    tools.register(
        ctx,
        ToolDefinition(
            "job_output",
            "Read a background job: for streaming jobs, the output produced since your previous read; for jobs "
            "with a single final output, their result once finished.",
            JOB_OUTPUT,
            body.output,
        ),
    )
    tools.register(
        ctx,
        ToolDefinition(
            "job_list",
            "Show your background jobs, running or finished, with id, kind and status.",
            JOB_LIST,
            body.list_jobs,
        ),
    )
    tools.register(ctx, ToolDefinition("job_kill", "Ask a running background job to stop.", JOB_KILL, body.kill))
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is not None:
        system_prompt.section(ctx, "tool:jobs", 1600, GUIDANCE, interpolate=False)


tools_plugin.name = "tool-jobs"  # type: ignore[attr-defined]
tools_plugin.inject = (TOOLS, JOBS)  # type: ignore[attr-defined]
tools_plugin.optional = (SYSTEM_PROMPT,)  # type: ignore[attr-defined]
tools_plugin.Config = JobToolsConfig  # type: ignore[attr-defined]
