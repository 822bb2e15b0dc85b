"""The one-shot ``bash`` tool and its sandboxed executor (spec 05 §4.4, §5.5).

Each call runs ``bash -c`` in a fresh process group, confined by bubblewrap unless the call's
mode is ``danger-full-access``. With a job registry composed, a command that outlives its
timeout moves to the background instead of being killed.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
from typing import Any

from pydsh.agent.cwd import quote
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.kernel.keys import HOST_INFO
from pydsh.policy.keys import SANDBOX
from pydsh.session.keys import SESSION_PERSISTENCE
from pydsh.session.persistence.base import SessionPersistence
from pydsh.tools.files import current_dir, escalated_mode, resolve
from pydsh.tools.jobs import Job, JobRegistry
from pydsh.tools.keys import JOBS
from pydsh.tools.process import Run
from pydsh.tools.protected import child_environ
from pydsh.tools.schema import compact_json

READ_ONLY_FS = "read-only file system"
PROMOTED = (
    "[still running after {ms}ms; moved to background job {job}]\n"
    "The command keeps running in the background. You will be notified when it finishes; "
    "read newer output with job_output, stop it with job_kill."
)
GUIDANCE = "Look for an [exit code: N] marker in each bash result and look into any failure before you move on."

DESCRIPTION = (
    "Run a bash command with `bash -c` and return what it printed on stdout and stderr. Every call starts a new "
    "shell, so nothing carries over between calls; set `workdir` instead of running `cd`. Managed `$DSH_*` "
    "environment variables describe the current harness environment. Long output is cut to its tail, and the "
    "complete output is written to a file whose path is reported when possible. Put `description` ahead of "
    "`command` in the arguments. Before deleting or moving anything, make sure the resolved absolute target path "
    "is the one you mean, and never delete or move a computed path you have not checked. An unset variable "
    "expands to an empty string, so write `${VAR:?}` for variables used in such paths. Commands may run inside a "
    "file sandbox: a blocked file operation shows up as `[sandbox: file access denied under <mode> mode]`, which "
    "is a policy denial — do not try to get around it another way."
)


def parameters(sandboxed: bool, background: bool) -> dict[str, Any]:
    """The ``bash`` schema; escalation and background fields only where they can work."""
    properties: dict[str, Any] = {
        "description": {
            "type": "string",
            "description": "What the command does, in active voice and 5-10 words; the UI shows it. For example: "
            '"ls -la" → "List all files with details"; "git diff" → "Show unstaged changes"; "pip install -e ." '
            '→ "Install the package in editable mode".',
        },
        "command": {"type": "string", "description": "Bash command to run."},
        "timeoutMs": {
            "type": "number",
            "description": "Time limit in milliseconds, bounded by the executor's configured default and maximum. "
            "When it runs out the command is not killed: it keeps running as a background job.",
        },
        "workdir": {
            "type": "string",
            "description": "Directory to run in. Defaults to the current working directory (initially the session "
            "workspace); a relative path resolves against it.",
        },
    }
    if background:
        properties["run_in_background"] = {
            "type": "boolean",
            "description": "Start the command as a background job and return its job id at once; read it with "
            "job_output and stop it with job_kill. No timeout applies.",
        }
    if sandboxed:
        properties["sandbox_permissions"] = {
            "type": "string",
            "description": "Only for retrying, once, the exact command the sandbox just denied: the narrowest wider "
            "sandbox mode that would allow it. The retry asks the user for approval.",
            "enum": ["workspace-write", "danger-full-access"],
        }
        properties["justification"] = {
            "type": "string",
            "description": "Needed with sandbox_permissions: a single sentence telling the user why this exact "
            "command needs wider access, written in the language of the user’s current request.",
        }
    return {"type": "object", "properties": properties, "required": ["description", "command"]}


def shell_env(ctx: Context, exec: ToolExec) -> dict[str, str]:
    """The parent environment minus secrets and ``DSH_*``, plus the managed ``DSH_*`` facts."""
    env = child_environ()
    env["DSH_HOME"] = str(dsh_home())
    env["DSH_SHELL"] = "1"
    session = exec.session
    if session is not None:
        env["DSH_SESSION_ID"] = session.id
    host = ctx.get(HOST_INFO)
    if isinstance(host, dict):
        if host.get("profile"):
            env["DSH_PROFILE"] = str(host["profile"])
        if host.get("profile_dir"):
            env["DSH_PROFILE_DIR"] = str(host["profile_dir"])
    persistence: SessionPersistence | None = ctx.get(SESSION_PERSISTENCE)
    handle = persistence.handle_of(session.id) if persistence is not None and session is not None else None
    if handle is not None and handle.path is not None:
        env["DSH_SESSION_JSONL"] = str(handle.path)
    return env


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def combined(stdout: str, stderr: str) -> str:
    """stdout, then ``[stderr]`` and stderr on a line of their own."""
    body = stdout
    if stderr:
        if body and not body.endswith("\n"):
            body += "\n"
        body += f"[stderr]\n{stderr}"
    return body


def render(body: str, markers: list[str]) -> str:
    """A finished run: the body (``(no output)`` when empty) and its marker lines."""
    text = body or "(no output)"
    if markers:
        if not text.endswith("\n"):
            text += "\n"
        text += "\n".join(markers)
    return text


class Config(BaseModel):
    """``defaultTimeoutMs`` applies when a call sets none; ``maxTimeoutMs`` caps what a call asks for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    defaultTimeoutMs: int = 60000
    maxTimeoutMs: int = 600000


class BashTool:
    """The body of ``bash``, bound to the plugin's context and config."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config

    def _validate(self, args: dict[str, Any]) -> float:
        if not args["command"].strip():
            raise ToolError("invalid command: expected a non-empty string")
        if not args["description"].strip():
            raise ToolError("invalid description: expected a non-empty string")
        if "timeoutMs" not in args:
            return self.config.defaultTimeoutMs
        timeout = args["timeoutMs"]
        if not (math.isfinite(timeout) and timeout > 0):
            raise ToolError(f"invalid timeoutMs: expected a positive number, got {compact_json(timeout)}")
        return float(min(timeout, self.config.maxTimeoutMs))

    async def __call__(self, args: dict[str, Any], exec: ToolExec) -> str:
        timeout_ms = self._validate(args)
        mode = await escalated_mode(self.ctx, exec, args, "command")
        jobs: JobRegistry | None = self.ctx.get(JOBS)
        background = args.get("run_in_background") is True
        if background and jobs is None:
            raise ToolError("background jobs unavailable")
        cwd = resolve(self.ctx, exec, args["workdir"]) if "workdir" in args else current_dir(self.ctx, exec)
        if not os.path.isdir(cwd):
            raise ToolError(f"workdir does not exist: {quote(cwd)}")
        argv = ["bash", "-c", args["command"]]
        if mode is not None:
            argv = await self.ctx.require(SANDBOX).confine(mode, exec.session, argv)
        run = await Run.start(argv, cwd, shell_env(self.ctx, exec), exec.session.id if exec.session else "")
        job = None
        if jobs is not None:
            job = jobs.create(exec, "bash", args["command"], stop=run.terminate, stdout=run.stdout, stderr=run.stderr)
            run.finished.add_done_callback(lambda _task: settle(jobs, job, run))
            if background:
                jobs.background(job)
                return f"started background job {job.id}"
        try:
            await asyncio.wait_for(asyncio.shield(run.finished), timeout_ms / 1000)
        except TimeoutError:
            return await self._expired(run, job, jobs, timeout_ms, mode)
        except BaseException:
            await run.kill()
            raise
        return self._finished(run, mode, [])

    async def _expired(
        self, run: Run, job: Job | None, jobs: JobRegistry | None, timeout_ms: float, mode: str | None
    ) -> str:
        ms = compact_json(timeout_ms)
        if job is None or jobs is None:
            await run.kill()
            return self._finished(run, mode, [f"[timed out after {ms}ms]"])
        so_far = combined(run.stdout.text(), run.stderr.text())
        job.mark_read()
        jobs.background(job)
        if so_far and not so_far.endswith("\n"):
            so_far += "\n"
        return so_far + PROMOTED.format(ms=ms, job=job.id)

    def _finished(self, run: Run, mode: str | None, markers: list[str]) -> str:
        code = run.returncode or 0
        stderr = run.stderr.text()
        head: list[str] = []
        if code != 0 and mode not in (None, "danger-full-access") and READ_ONLY_FS in stderr.lower():
            from pydsh.policy.sandbox import denial

            head = denial(mode or "", "command").split("\n")
        tail = [f"[killed by signal: {signal_name(code)}]" if code < 0 else f"[exit code: {code}]"] if code else []
        return render(combined(run.stdout.text(), stderr), head + markers + tail)


def settle(jobs: JobRegistry, job: Job, run: Run) -> None:
    """Settle ``job`` from its run's exit status."""
    code = run.returncode
    if job.status == "stopping":
        cause: dict[str, Any] = {"kind": "kill"}
        if job.kill_reason:
            cause["reason"] = job.kill_reason
        jobs.settle(job, "killed", None, cause)
    elif code is not None and code < 0:
        jobs.settle(job, "failed", f"killed by signal: {signal_name(code)}", {"kind": "exit"})
    else:
        jobs.settle(job, "completed", f"exit code: {code}" if code else None, {"kind": "exit"})


name = "tool-bash"
inject = (TOOLS,)
optional = (SYSTEM_PROMPT, SANDBOX, JOBS)


def apply(ctx: Context, config: Config) -> None:
    """Register ``bash`` (its schema depends on the composed sandbox and job registry) and its guidance."""
    schema = parameters(ctx.get(SANDBOX) is not None, ctx.get(JOBS) is not None)
    ctx.require(TOOLS).register(ctx, ToolDefinition("bash", DESCRIPTION, schema, BashTool(ctx, config)))
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is not None:
        system_prompt.section(ctx, "tool:bash", 1000, GUIDANCE, interpolate=False)
