"""The ``sandbox`` service: sandbox mode, the file fence, bash confinement and escalation (spec 05 §5.3–5.6).

The mode is a fold over the session's ``sandbox/mode`` events. File tools fence their writes to
:meth:`Sandbox.writable_roots` (checked on the canonical path and on the directory fd they write
through); bash asks :meth:`Sandbox.confine` for a bubblewrap argv and never runs a confined mode
unconfined. ``sandbox_permissions`` escalations go through the ``approval`` service.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from pydsh.agent.cwd import quote
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import ToolError
from pydsh.kernel.context import Context
from pydsh.policy.keys import APPROVAL, PERMISSIONS, SANDBOX
from pydsh.policy.secrets import secret_masks
from pydsh.policy.state import RANK, SANDBOX_MODE, workspace_root
from pydsh.session.log import Session

if TYPE_CHECKING:
    from pydsh.contract.agent import Agent
    from pydsh.contract.tools import ToolExec

DENIAL = "[sandbox: file access denied under {mode} mode]"
HINT = (
    "[sandbox: escalation available — retry this exact {subject} once with sandbox_permissions "
    "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)
UNAVAILABLE = (
    'sandbox mode "{mode}" is requested but no sandbox backend is usable on this host; refusing to run the '
    "command unconfined. Install bubblewrap (bwrap) — otherwise switch the consumer to danger-full-access."
)
CONTEXT_TEXT = {
    "read-only": (
        "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot "
        "modify files in the standing mode. Do not refuse a required modification from this policy alone: try "
        "an available tool normally and follow any denial and escalation guidance it returns."
    ),
    "workspace-write": (
        "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may "
        "modify files under the session workspace: {root}. Some platform temporary areas may also be writable."
    ),
    "danger-full-access": (
        "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications "
        "by available operations."
    ),
}
PROBE_TIMEOUT_S = 5.0
PROBE_RETRY_S = 60.0


class SandboxUnavailableError(ToolError):
    """A confined mode was requested but no backend is usable; nothing ran."""

    error_name = "SandboxUnavailableError"


def denial(mode: str, subject: str | None) -> str:
    """The denial marker, plus the escalation hint line for ``command``/``operation`` subjects."""
    marker = DENIAL.format(mode=mode)
    return f"{marker}\n{HINT.format(subject=subject)}" if subject else marker


def temp_roots() -> list[str]:
    """The temporary areas writable under ``workspace-write``."""
    roots = [os.path.realpath("/tmp"), os.path.realpath(tempfile.gettempdir())]
    if sys.platform == "darwin":
        roots.append("/private/tmp")
    return list(dict.fromkeys(roots))


def within(target: str, roots: list[str]) -> bool:
    """``target`` equals one of ``roots`` or lies below it."""
    for root in roots:
        if target == root:
            return True
        try:
            if os.path.commonpath([target, root]) == root:
                return True
        except ValueError:
            continue
    return False


def bwrap_profile(mode: str, root: str) -> list[str]:
    """The bubblewrap arguments of a confined mode (spec 05 §5.5, exact)."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "--die-with-parent"]
    if mode == "workspace-write":
        args += ["--tmpfs", "/tmp", "--bind", root, root]
    return args


class Bwrap:
    """Finds ``bwrap`` on ``PATH`` and probes it once; a failed probe is retried after a minute."""

    def __init__(self) -> None:
        self._usable: dict[str, bool] = {}
        self._failed_at: dict[str, float] = {}
        self._details: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def find(self) -> tuple[str | None, str]:
        """``(path, "")`` when usable, else ``(None, detail)``."""
        path = shutil.which("bwrap")
        if path is None:
            return None, ""
        async with self._lock:
            if self._usable.get(path):
                return path, ""
            failed = self._failed_at.get(path)
            if failed is None or time.monotonic() - failed >= PROBE_RETRY_S:
                detail = await self._probe(path)
                if not detail:
                    self._usable[path] = True
                    return path, ""
                self._failed_at[path] = time.monotonic()
                self._details[path] = detail
            return None, self._details.get(path, "")

    @staticmethod
    async def _probe(path: str) -> str:
        argv = [path, *bwrap_profile("read-only", "/"), "--", "/bin/true"]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return str(exc)
        try:
            _out, err = await asyncio.wait_for(proc.communicate(), PROBE_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return f"bwrap probe timed out after {PROBE_TIMEOUT_S:g}s"
        if proc.returncode != 0:
            return err.decode("utf-8", "replace").strip() or f"bwrap probe exited with {proc.returncode}"
        return ""


class Sandbox:
    """Sandbox mode, file fence, bash confinement and escalation for tool calls."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.bwrap = Bwrap()

    # -- state ------------------------------------------------------------------------------

    def mode(self, session: Session | None) -> str:
        """The session's standing mode: its last ``sandbox/mode``, else the configured default."""
        mode = session.fold(SANDBOX_MODE) if session is not None else None
        if mode in RANK:
            return str(mode)
        permissions = self.ctx.get(PERMISSIONS)
        return str(permissions.default_mode) if permissions is not None else "workspace-write"

    def workspace_root(self, session: Session | None) -> str:
        return workspace_root(session) if session is not None else os.path.realpath(os.getcwd())

    def context_text(self, agent: Agent | None) -> str | None:
        """The ``sandbox:policy`` runtime context of ``agent``'s session."""
        if agent is None:
            return None
        mode = self.mode(agent.session)
        return CONTEXT_TEXT[mode].format(root=quote(self.workspace_root(agent.session)))

    # -- file fence -------------------------------------------------------------------------

    def writable_roots(self, mode: str, session: Session | None) -> list[str] | None:
        """Roots a file tool may write under ``mode`` (``None`` = unrestricted)."""
        if mode == "danger-full-access":
            return None
        if mode == "read-only":
            return ["/dev/null"]
        return [self.workspace_root(session), *temp_roots()]

    # -- bash confinement -------------------------------------------------------------------

    async def confine(self, mode: str, session: Session | None, argv: list[str]) -> list[str]:
        """``argv`` wrapped for ``mode``; raises :class:`SandboxUnavailableError` when it cannot be confined."""
        if mode == "danger-full-access":
            return argv
        path, detail = await self.bwrap.find()
        if path is None:
            message = UNAVAILABLE.format(mode=mode)
            if detail:
                message += f" Runner failure: {detail}"
            raise SandboxUnavailableError(message, "SANDBOX_UNAVAILABLE")
        return [path, *bwrap_profile(mode, self.workspace_root(session)), *secret_masks(), "--", *argv]

    # -- escalation -------------------------------------------------------------------------

    async def escalate(self, exec: ToolExec, args: dict[str, Any], subject: str) -> str:
        """The mode this call runs under after validating and (when wider) approving ``sandbox_permissions``.

        ``subject`` is ``command`` for bash (a request equal to the current mode needs no justification)
        or ``operation`` for file tools.
        """
        effective = self.mode(exec.session)
        requested = args.get("sandbox_permissions")
        justification = args.get("justification")
        if requested is None:
            if isinstance(justification, str) and justification.strip():
                raise ToolError("invalid escalation: justification is only valid together with sandbox_permissions")
            return effective
        if subject == "command" and requested == effective:
            return effective
        if justification is None:
            raise ToolError("invalid escalation: sandbox_permissions requires a justification")
        if not str(justification).strip():
            raise ToolError("invalid justification: expected a non-empty sentence")
        if requested == effective:
            return effective
        if RANK[requested] < RANK[effective]:
            raise ToolError(
                f'sandbox escalation to "{requested}" is not strictly wider '
                f'than this call\'s current "{effective}" mode'
            )
        return await self._ask(exec, requested, str(justification).strip(), subject)

    async def _ask(self, exec: ToolExec, mode: str, justification: str, subject: str) -> str:
        approval = self.ctx.get(APPROVAL)
        if approval is None:
            raise ToolError(f'sandbox escalation to "{mode}" requires approval, but no approval service is composed')
        if exec.agent is None:
            raise ToolError(
                f'sandbox escalation to "{mode}" requires approval, but the call has no agent to route it through'
            )
        outcome = await approval.request(
            exec.agent,
            exec.name,
            call_id=exec.call_id,
            reason=f"escalate sandbox to {mode}: {justification}",
            display_reason={"en": f"Allow this operation with {mode} permissions: {justification}"},
            signal=exec.signal,
        )
        if outcome == "allowed-once":
            return mode
        if outcome == "rejected":
            raise ToolError(
                f'the user rejected escalating this {subject} to "{mode}"; it stays denied, '
                "so stop and explain instead of working around it"
            )
        if outcome == "cancelled":
            raise ToolError(f'approval for escalating to "{mode}" was cancelled')
        raise ToolError(f'sandbox escalation to "{mode}" requires approval, but no approval channel is available')


name = "sandbox-policy"
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: None) -> None:
    """Provide ``sandbox`` and the ``sandbox:policy`` runtime context."""
    sandbox = Sandbox(ctx)
    ctx.provide(SANDBOX, sandbox)
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is not None:
        system_prompt.context(ctx, "sandbox:policy", 110, sandbox.context_text, interpolate=False)
