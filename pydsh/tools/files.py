"""File plumbing shared by the file tools: path resolution, versions, fence checks and compare-and-replace writes.

A file's version is ``(st_ino, st_size, st_mtime_ns, sha256)``, the hash only for files up to 8 MiB
(spec 05 §3.8). Writes go through a temporary file in the target directory and ``os.replace``
after the fence and the version are checked once more (TOCTOU, spec 05 §5.4).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.agent.cwd import quote
from pydsh.tools.registry import ToolError, ToolExec

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

MAX_HASHED = 8 * 1024 * 1024
Version = tuple[int, int, int, str | None]
ABSENT = "absent"
"""Observation of a path that did not exist when it was read."""

_LOCKS: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
_UMASK: int | None = None


class FsError(ToolError):
    """A file-tool failure with an ``FS_*`` code."""

    error_name = "FsError"


@dataclass(frozen=True)
class Snapshot:
    """A regular file's bytes and the version they were read at."""

    version: Version
    data: bytes


def owner_of(exec: ToolExec) -> str:
    """Whose observations a call reads and writes: its agent (or, without one, its session)."""
    if exec.agent is not None:
        return exec.agent.id
    return exec.session.id if exec.session is not None else ""


def session_dir(exec: ToolExec) -> str:
    """The session workspace directory (header ``cwd``), or the process cwd."""
    cwd = exec.session.header.get("cwd") if exec.session is not None else None
    return str(cwd or os.getcwd())


async def escalated_mode(ctx: Context, exec: ToolExec, args: dict[str, Any], action: str) -> str | None:
    """The sandbox mode a bash ``command`` or file ``operation`` runs under after any escalation
    (spec 05 §5.6); ``None`` when no sandbox is composed, where escalation fields are refused."""
    sandbox = ctx.get("sandbox")
    if sandbox is None:
        if args.get("sandbox_permissions") is not None:
            target = "executor" if action == "command" else "filesystem"
            raise ToolError(
                f"sandbox_permissions is not available in this composition (no sandboxing {target} to escalate)"
            )
        return None
    mode: str = await sandbox.escalate(exec, args, action)
    return mode


def current_dir(ctx: Context, exec: ToolExec) -> str:
    """The call's current working directory (the ``working_directory`` state when composed)."""
    service = ctx.get("working_directory")
    if service is not None and exec.agent is not None:
        return str(service.current(exec.agent))
    return session_dir(exec)


def resolve(ctx: Context, exec: ToolExec, path: str) -> str:
    """``path`` as a lexically normalised absolute path against the current working directory."""
    return os.path.normpath(os.path.join(current_dir(ctx, exec), os.path.expanduser(path)))


def version_of(st: os.stat_result, data: bytes | None) -> Version:
    digest = hashlib.sha256(data).hexdigest() if data is not None and len(data) <= MAX_HASHED else None
    return (st.st_ino, st.st_size, st.st_mtime_ns, digest)


def load(path: str, display: str, verb: str) -> Snapshot | None:
    """The file at ``path`` (``None`` when missing); a non-regular file fails with ``FS_NOT_REGULAR_FILE``."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise FsError(f"cannot {verb} {quote(display)}: not a regular file", "FS_NOT_REGULAR_FILE")
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return Snapshot(version_of(st, data), data)


def current_version(path: str) -> Version | None:
    """The version of the file at ``path`` now (``None`` when missing or not a regular file)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            data = f.read() if st.st_size <= MAX_HASHED else None
    except OSError:
        return None
    return version_of(st, data)


def decode_text(data: bytes) -> str | None:
    """UTF-8 text, or ``None`` for binary content (a NUL byte or invalid UTF-8)."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def path_lock(path: str) -> asyncio.Lock:
    """The lock serialising pydsh's writers of one canonical path."""
    lock = _LOCKS.get(path)
    if lock is None:
        lock = asyncio.Lock()
        _LOCKS[path] = lock
    return lock


def _default_mode() -> int:
    global _UMASK
    if _UMASK is None:
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return 0o666 & ~_UMASK


def replace_file(target: str, data: bytes, recheck: Callable[[str], Any]) -> None:
    """Write ``data`` to ``target`` atomically; ``recheck(real_target)`` raises to abort just before ``os.replace``."""
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = _default_mode()
    fd, tmp = tempfile.mkstemp(prefix=".pydsh-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        recheck(os.path.join(os.path.realpath(directory), os.path.basename(target)))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Gate:
    """Fence and read-before-write checks of the file tools; services are looked up per call."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def seen(self, exec: ToolExec, path: str) -> Version | str | None:
        """The recorded observation of ``path`` (``ABSENT``), or ``None`` (never read)."""
        observations = self.ctx.get("fs_observations")
        return observations.get(owner_of(exec), path) if observations is not None else None

    def observing(self) -> bool:
        return self.ctx.get("fs_observations") is not None

    def record(self, exec: ToolExec, path: str, version: Version | str) -> None:
        observations = self.ctx.get("fs_observations")
        if observations is not None:
            observations.record(owner_of(exec), path, version)

    async def mode(self, exec: ToolExec, args: dict[str, Any]) -> str | None:
        """The sandbox mode of this call after escalation, or ``None`` when no sandbox is composed."""
        return await escalated_mode(self.ctx, exec, args, "operation")

    def fence(self, exec: ToolExec, path: str, mode: str | None, *, hint: bool = True) -> None:
        """Raise ``FS_SANDBOX_DENIED`` when ``path`` is outside the writable roots of ``mode``."""
        sandbox = self.ctx.get("sandbox")
        if sandbox is None or mode is None or sandbox.allows(exec.session, path, mode):
            return
        from pydsh.policy.sandbox import denial

        raise FsError(denial(mode, "operation" if hint else None), "FS_SANDBOX_DENIED")
