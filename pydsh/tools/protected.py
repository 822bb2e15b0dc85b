"""What model tools may never read: secrets in the environment, the harness's own process files, credentials.

Child processes of the tools (bash, ripgrep) get :func:`child_environ`, the parent environment minus
secret-named variables and ``DSH_*``. Before the first child starts, the secret values in this
process's initial environment block — what ``/proc/<pid>/environ`` shows to same-user processes — are
overwritten in place, while ``os.environ`` keeps them for the model adapters. File reads refuse the
harness's own ``/proc`` entries and pydsh's credential file in every mode and a short deny-list of
well-known secret locations in the confined modes; confined bash gets the same files masked.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydsh.agent.cwd import quote
from pydsh.policy.keys import SANDBOX
from pydsh.policy.secrets import credential_file, deny_listed
from pydsh.tools.files import FsError

if TYPE_CHECKING:
    from pydsh.contract.tools import ToolExec
    from pydsh.kernel.context import Context

SECRET_NAME = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)
CONFINED = frozenset({"read-only", "workspace-write"})

PROCESS_FILE = "a file of the harness's own process, never readable by tools"
CREDENTIAL_FILE = "pydsh's credential file, never readable by tools"
DENY_LISTED = "a well-known secret location, not readable under {mode} mode"
_PROC_ENTRY = re.compile(r"/proc/(\d+)(?:/|$)")
_STAT_ENV_START = 47
"""Index of ``env_start`` among the fields after the command name in ``/proc/self/stat`` (field 50)."""


def child_environ() -> dict[str, str]:
    """The environment for a tool's child process: no secret-named variables, no ``DSH_*``."""
    conceal_initial_environment()
    return {k: v for k, v in os.environ.items() if not k.startswith("DSH_") and not SECRET_NAME.search(k)}


@functools.cache
def conceal_initial_environment() -> None:
    """Overwrite secret values in this process's initial environment block (once), keeping ``os.environ``.

    ``/proc/<pid>/environ`` reads that block, so an unconfined child could otherwise read the API key
    back from its parent. The C environment is first pointed at fresh copies, so C code and
    inherited environments keep seeing the values.
    """
    import ctypes

    bounds = _environ_bounds()
    if bounds is None:
        return
    start, end = bounds
    offset = 0
    for entry in ctypes.string_at(start, end - start).split(b"\0"):
        name, sep, value = entry.partition(b"=")
        decoded = os.fsdecode(name)
        if sep and value and SECRET_NAME.search(decoded):
            if decoded in os.environ:
                os.environ[decoded] = os.environ[decoded]
            ctypes.memset(start + offset + len(name) + 1, ord("*"), len(value))
        offset += len(entry) + 1


def _environ_bounds() -> tuple[int, int] | None:
    """``(env_start, env_end)`` when the kernel reports them and they hold exactly ``/proc/self/environ``."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
        start, end = int(fields[_STAT_ENV_START]), int(fields[_STAT_ENV_START + 1])
    except (OSError, ValueError, IndexError):
        return None
    if not start or end - start != len(block) or ctypes.string_at(start, end - start) != block:
        return None
    return start, end


def _own_process(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        return str(pid) in os.listdir("/proc/self/task")
    except OSError:
        return False


@dataclass(frozen=True)
class Protection:
    """The read refusals of one call: always the harness's process files and credentials, plus the
    deny-list when ``mode`` is confined."""

    mode: str | None

    def reason(self, path: str) -> str | None:
        """Why the canonical ``path`` may not be read, or ``None``."""
        match = _PROC_ENTRY.match(path)
        if match is not None and _own_process(int(match[1])):
            return PROCESS_FILE
        if path == os.path.realpath(credential_file()):
            return CREDENTIAL_FILE
        if self.mode in CONFINED and deny_listed(path):
            return DENY_LISTED.format(mode=self.mode)
        return None

    def within(self, root: str) -> Callable[[str], bool]:
        """Whether a path a search found below ``root`` must be skipped; searches do not follow symlinks
        below their root, so only the root is resolved."""
        real = os.path.realpath(root)

        def refused(path: str) -> bool:
            rest = path[len(root) :].lstrip("/")
            return self.reason(os.path.join(real, rest) if rest else real) is not None

        return refused

    def check(self, path: str, display: str, verb: str) -> None:
        """Raise ``FS_PROTECTED_PATH`` when the canonical ``path`` is protected."""
        reason = self.reason(path)
        if reason is not None:
            raise FsError(f"cannot {verb} {quote(display)}: {reason}", "FS_PROTECTED_PATH")

    def check_opened(self, fd: int, display: str, verb: str) -> None:
        """:meth:`check` on what ``fd`` really is (its ``/proc/self/fd`` link), so a swapped path cannot slip by."""
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = os.path.realpath(display)
        self.check(path, display, verb)


def protection(ctx: Context, exec: ToolExec) -> Protection:
    """The read refusals of ``exec`` under its session's standing sandbox mode."""
    sandbox = ctx.get(SANDBOX)
    return Protection(str(sandbox.mode(exec.session)) if sandbox is not None else None)
