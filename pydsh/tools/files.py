"""File plumbing shared by the file tools: path resolution, versions, fence checks and compare-and-replace writes.

A file's version is ``(st_ino, st_size, st_mtime_ns, sha256)``, the hash only for files up to 8 MiB
(spec 05 §3.8). Writes happen relative to a directory fd opened component by component from ``/``
without following symlinks, so the directory the fence checked is the one written; the temporary
file is fsynced, the fence and the version are checked once more (TOCTOU, spec 05 §5.4), then
``os.replace`` and an fsync of the directory make the edit durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import secrets
import stat
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.agent.cwd import quote
from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.contract.tools import ToolError, ToolExec
from pydsh.kernel.errors import PydshError
from pydsh.policy.keys import SANDBOX
from pydsh.tools.keys import FS_OBSERVATIONS

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

MAX_HASHED = 8 * 1024 * 1024
Version = tuple[int, int, int, str | None]
ABSENT = "absent"
"""Observation of a path that did not exist when it was read."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
WALK_ATTEMPTS = 3
"""How often a write re-resolves a path that changed under it before giving up."""

_LOCKS: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()


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
    sandbox = ctx.get(SANDBOX)
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
    service = ctx.get(WORKING_DIRECTORY)
    if service is not None and exec.agent is not None:
        return str(service.current(exec.agent))
    return session_dir(exec)


def resolve(ctx: Context, exec: ToolExec, path: str) -> str:
    """``path`` as a lexically normalised absolute path against the current working directory."""
    return os.path.normpath(os.path.join(current_dir(ctx, exec), os.path.expanduser(path)))


def version_of(st: os.stat_result, data: bytes | None) -> Version:
    digest = hashlib.sha256(data).hexdigest() if data is not None and len(data) <= MAX_HASHED else None
    return (st.st_ino, st.st_size, st.st_mtime_ns, digest)


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


def read_umask() -> int:
    """The process umask, from ``/proc/self/status`` where the kernel reports it, else by one flip at import."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


UMASK = read_umask()
"""Read once at import, before tool threads exist, so no later call flips the umask process-wide."""


class PathChanged(PydshError):
    """A component of a checked path turned into a symlink (or went away) while it was being opened."""


@dataclass(frozen=True)
class Fence:
    """A pure write check: the writable roots of one call (``None``: unrestricted) and its denial text."""

    roots: list[str] | None = None
    denial: str = ""

    @property
    def fenced(self) -> bool:
        return self.roots is not None

    def check(self, path: str) -> None:
        """Raise ``FS_SANDBOX_DENIED`` unless ``path`` (canonicalised) lies under a writable root."""
        from pydsh.policy.sandbox import within

        if self.roots is not None and not within(canonical(path), self.roots):
            raise FsError(self.denial, "FS_SANDBOX_DENIED")


def canonical(path: str) -> str:
    """``os.path.realpath(path)``; a path that changes while it is resolved stays as given (the walk rechecks)."""
    try:
        return os.path.realpath(path)
    except OSError:
        return path


UNFENCED = Fence()


def _changed_at(dir_fd: int, name: str) -> bool:
    """After ``ELOOP``/``ENOTDIR`` on ``name``: whether it is (now) a symlink or a directory, i.e. it moved."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return True
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


def open_directory(path: str, *, create: bool, nofollow: bool) -> int | None:
    """An fd of the absolute directory ``path``, opened component by component from ``/``.

    With ``nofollow`` no component may be a symlink (``PathChanged``), so the fd is the directory that
    was checked. Missing components are created with ``create``, else the result is ``None``.
    """
    flags = DIR_FLAGS | (os.O_NOFOLLOW if nofollow else 0)
    fd = os.open("/", DIR_FLAGS)
    try:
        for name in [part for part in path.split("/") if part]:
            try:
                child = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                    sync_directory(fd)
                child = _open_child(name, flags, fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _changed_at(fd, name):
                    raise PathChanged(name) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_child(name: str, flags: int, fd: int) -> int:
    try:
        return os.open(name, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            raise PathChanged(name) from None
        raise


def directory_path(dir_fd: int, fallback: str) -> str:
    """Where the directory ``dir_fd`` is now (its ``/proc/self/fd`` link), else ``fallback``."""
    try:
        return os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return fallback


def load_at(
    dir_fd: int, name: str, display: str, verb: str, opened: Callable[[int], None] | None = None
) -> Snapshot | None:
    """The regular file ``name`` in ``dir_fd`` (``None`` when missing); not following a final symlink.

    ``opened(fd)`` may refuse the file once it is open, before anything is read.
    """
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathChanged(name) from None
        raise
    if opened is not None:
        try:
            opened(fd)
        except BaseException:
            os.close(fd)
            raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FsError(f"cannot {verb} {quote(display)}: not a regular file", "FS_NOT_REGULAR_FILE")
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    return Snapshot(version_of(st, data), data)


def version_at(dir_fd: int, name: str) -> Version | None:
    """The version of the regular file ``name`` in ``dir_fd`` now (``None`` when missing or not regular)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read() if st.st_size <= MAX_HASHED else None
    return version_of(st, data)


def load(path: str, display: str, verb: str, opened: Callable[[int], None] | None = None) -> Snapshot | None:
    """The file at the canonical ``path`` (``None`` when missing); not regular: ``FS_NOT_REGULAR_FILE``."""
    dir_fd = open_directory(os.path.dirname(path), create=False, nofollow=False)
    if dir_fd is None:
        return None
    try:
        return load_at(dir_fd, os.path.basename(path), display, verb, opened)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True)
class Written:
    """A finished replace: the canonical target, what it held before and its new version."""

    target: str
    before: Snapshot | None
    version: Version | None


Plan = Callable[[Snapshot | None], bytes]
"""Given the file as found (``None``: absent), the bytes to write; raises to abort without writing."""


@dataclass(frozen=True)
class Rewrite:
    """Replace the file at ``display`` with ``plan(current)`` through directory fds that ``fence`` checked.

    A path that changes under the walk is resolved and checked again; when it keeps changing the write
    is denied (fenced) or reported stale. :meth:`run` blocks: call it in a thread.
    """

    display: str
    verb: str
    fence: Fence
    plan: Plan
    stale: Callable[[], Exception]

    def run(self) -> Written:
        for _attempt in range(WALK_ATTEMPTS):
            try:
                target = os.path.realpath(self.display)
            except OSError:
                continue
            self.fence.check(target)
            try:
                return self._once(target)
            except PathChanged:
                continue
        if self.fence.fenced:
            raise FsError(self.fence.denial, "FS_SANDBOX_DENIED")
        raise self.stale()

    def _once(self, target: str) -> Written:
        directory, name = os.path.split(target)
        nofollow = self.fence.fenced
        dir_fd = open_directory(directory, create=False, nofollow=nofollow)
        try:
            before = load_at(dir_fd, name, self.display, self.verb) if dir_fd is not None else None
            data = self.plan(before)
            if dir_fd is None:
                dir_fd = open_directory(directory, create=True, nofollow=nofollow)
                assert dir_fd is not None
            opened = dir_fd
            expected = before.version if before is not None else None
            _replace_at(opened, name, data, lambda: self._recheck(opened, directory, name, expected))
            return Written(target, before, version_at(opened, name))
        finally:
            if dir_fd is not None:
                os.close(dir_fd)

    def _recheck(self, dir_fd: int, directory: str, name: str, expected: Version | None) -> None:
        """The fence on where the directory is now, and the version compare, just before the rename."""
        self.fence.check(os.path.join(directory_path(dir_fd, directory), name))
        if version_at(dir_fd, name) != expected:
            raise self.stale()


def _new_temp(dir_fd: int) -> tuple[int, str]:
    while True:
        name = f".pydsh-{secrets.token_hex(6)}.tmp"
        try:
            return os.open(name, TEMP_FLAGS, 0o600, dir_fd=dir_fd), name
        except FileExistsError:
            continue


def _replace_at(dir_fd: int, name: str, data: bytes, recheck: Callable[[], None]) -> None:
    """Write ``data`` to an fsynced temp file in ``dir_fd``, ``recheck()``, rename it to ``name``, fsync ``dir_fd``."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~UMASK
    except OSError:
        mode = 0o666 & ~UMASK
    fd, tmp = _new_temp(dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(fd, mode)
            os.fsync(fd)
        recheck()
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    sync_directory(dir_fd)


def sync_directory(dir_fd: int) -> None:
    """fsync a directory so a rename or mkdir in it survives a crash; filesystems that cannot are skipped."""
    try:
        os.fsync(dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise


class Gate:
    """Fence and read-before-write checks of the file tools; services are looked up per call."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def seen(self, exec: ToolExec, path: str) -> Version | str | None:
        """The recorded observation of ``path`` (``ABSENT``), or ``None`` (never read)."""
        observations = self.ctx.get(FS_OBSERVATIONS)
        return observations.get(owner_of(exec), path) if observations is not None else None

    def observing(self) -> bool:
        return self.ctx.get(FS_OBSERVATIONS) is not None

    def record(self, exec: ToolExec, path: str, version: Version | str) -> None:
        observations = self.ctx.get(FS_OBSERVATIONS)
        if observations is not None:
            observations.record(owner_of(exec), path, version)

    async def mode(self, exec: ToolExec, args: dict[str, Any]) -> str | None:
        """The sandbox mode of this call after escalation, or ``None`` when no sandbox is composed."""
        return await escalated_mode(self.ctx, exec, args, "operation")

    def fence_for(self, exec: ToolExec, mode: str | None, *, hint: bool = True) -> Fence:
        """The write check of this call under ``mode``, safe to use off the event loop."""
        sandbox = self.ctx.get(SANDBOX)
        if sandbox is None or mode is None:
            return UNFENCED
        from pydsh.policy.sandbox import denial

        roots = sandbox.writable_roots(mode, exec.session)
        return Fence(roots, denial(mode, "operation" if hint else None)) if roots is not None else UNFENCED
