"""The persistent ``bash`` of the minimal preset: one shell per agent on a PTY (spec 05 §4.13).

Commands are fed to a non-interactive bash one line at a time, bracketed by unique start/end
markers, so the directory, variables and functions persist between calls. stdout and stderr go
to a pseudo-terminal; commands read ``/dev/null``. A timeout or a dead shell resets it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import pty
import re
import secrets
import signal
import time
import tty
from typing import Any

from pydsh.agent.hooks import AGENT_DISPOSED
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolExec
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.policy.keys import SANDBOX
from pydsh.tools.bash import shell_env, signal_name
from pydsh.tools.editor import MAX_OUTPUT, clip
from pydsh.tools.files import current_dir, owner_of

READ_CHUNK = 65536
EXIT_WAIT_S = 1.0
HEAD_BYTES = 4 * MAX_OUTPUT + 8
MARKER_WINDOW = 64
RESET = (
    "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current "
    "directory and environment."
)
DESCRIPTION = (
    "Run commands in a bash shell that stays alive for this agent: the current directory, exported variables "
    "and other shell state carry over from one call to the next."
)
PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Bash command to run. Prefer relative paths in the command."}
    },
    "required": ["command"],
}


class OutputBuffer:
    """One command's output between its markers, held in bounded memory however much it prints.

    ``clip`` shows at most ``MAX_OUTPUT`` characters from the start, so the body keeps its first
    ``HEAD_BYTES`` (enough bytes for them) and, past those, only the last ``MARKER_WINDOW`` bytes:
    enough to find an end marker split across reads. Before the start marker, the last
    ``HEAD_BYTES`` are kept (what a shell that dies early printed); after the end marker, nothing.
    """

    def __init__(self, token: str | None = None) -> None:
        self.start = f"__PYDSH_{token}_START__\n".encode() if token else None
        self.end = re.compile(rb"\n__PYDSH_" + (token or "").encode() + rb"_END_(\d+)__\n")
        self.data = bytearray()
        self.started = False
        self.kept = 0
        self.overflowed = False
        self.code: int | None = None

    def __len__(self) -> int:
        return len(self.data)

    @property
    def done(self) -> bool:
        return self.code is not None

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes read from the PTY."""
        if self.start is None or self.done:
            return
        self.data += chunk
        if not self.started:
            begin = self.data.find(self.start)
            if begin < 0:
                del self.data[: max(0, len(self.data) - HEAD_BYTES)]
                return
            del self.data[: begin + len(self.start)]
            self.started = True
        found = self.end.search(self.data, self.kept)
        if found is not None:
            self.code = int(found.group(1))
            del self.data[found.start() :]
            return
        self.kept = max(self.kept, len(self.data) - MARKER_WINDOW)
        if self.kept > HEAD_BYTES:
            dropped = self.data[HEAD_BYTES : self.kept]
            self.overflowed = self.overflowed or dropped.count(b"\n") != len(dropped)
            del self.data[HEAD_BYTES : self.kept]
            self.kept = HEAD_BYTES

    def text(self) -> str:
        """The body so far as ``clip`` would see the whole of it: decoded, trailing newlines trimmed."""
        if self.overflowed:
            return bytes(self.data[:HEAD_BYTES]).decode("utf-8", "replace")
        return bytes(self.data).decode("utf-8", "replace").rstrip("\n")


class Shell:
    """One bash process whose output arrives through a PTY master."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int, mode: str | None) -> None:
        self.proc = proc
        self.master = master
        self.mode = mode
        self.buffer = OutputBuffer()
        self.eof = False
        self.changed = asyncio.Event()
        self.lock = asyncio.Lock()
        asyncio.get_running_loop().add_reader(master, self._readable)

    @classmethod
    async def spawn(cls, argv: list[str], cwd: str, env: dict[str, str], mode: str | None) -> Shell:
        master, slave = pty.openpty()
        tty.setraw(slave)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        return cls(proc, master, mode)

    @property
    def alive(self) -> bool:
        return not self.eof and self.proc.returncode is None

    def _readable(self) -> None:
        try:
            data = os.read(self.master, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.buffer.feed(data)
        else:
            self.eof = True
            asyncio.get_running_loop().remove_reader(self.master)
        self.changed.set()

    async def run(self, command: str, timeout_s: float) -> tuple[str, str, int | None]:
        """``(state, output, code)`` with state ``done``, ``timeout`` or ``died``."""
        token = secrets.token_hex(8)
        encoded = base64.b64encode(command.encode("utf-8", "surrogateescape")).decode()
        line = (
            f"printf '%s\\n' '__PYDSH_{token}_START__'; eval \"$(printf %s {encoded} | base64 -d)\" </dev/null; "
            f"__pydsh_rc=$?; printf '\\n__PYDSH_{token}_END_%s__\\n' \"$__pydsh_rc\"\n"
        )
        self.buffer = OutputBuffer(token)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode())
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return "died", "", await self._exit_code()
        deadline = time.monotonic() + timeout_s
        while True:
            if self.buffer.done:
                return "done", self.buffer.text(), self.buffer.code
            if not self.alive:
                return "died", self.buffer.text(), await self._exit_code()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", self.buffer.text(), None
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), remaining)

    async def _exit_code(self) -> int | None:
        try:
            return await asyncio.wait_for(self.proc.wait(), EXIT_WAIT_S)
        except TimeoutError:
            return None

    def close(self) -> None:
        """Kill the shell's process group and release the PTY."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if not self.eof:
            asyncio.get_running_loop().remove_reader(self.master)
            self.eof = True
        with contextlib.suppress(OSError):
            os.close(self.master)
        if self.proc.stdin is not None:
            self.proc.stdin.close()


def death_marker(code: int | None) -> str:
    if code is None:
        return "[shell exited]"
    if code < 0:
        return f"[shell killed by signal: {signal_name(code)}]"
    return f"[shell exited: code {code}]"


class Config(BaseModel):
    """``description``: the model-visible tool description; ``timeoutMs``: per-command limit."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    description: str = DESCRIPTION
    timeoutMs: int = 300000


class PersistentBash:
    """The tool body: one shell per agent, created on first use and reset after a timeout or death."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.shells: dict[str, Shell] = {}
        self._reaping: set[asyncio.Task[Any]] = set()

    def reset(self, owner: str) -> None:
        """Kill ``owner``'s shell (if any); the next call starts a fresh one."""
        shell = self.shells.pop(owner, None)
        if shell is not None:
            shell.close()
            task = asyncio.get_running_loop().create_task(shell.proc.wait())
            self._reaping.add(task)
            task.add_done_callback(self._reaping.discard)

    async def close_all(self) -> None:
        """Kill every shell and wait for the processes to be reaped."""
        for owner in list(self.shells):
            self.reset(owner)
        if self._reaping:
            await asyncio.wait(set(self._reaping), timeout=EXIT_WAIT_S)

    async def _shell(self, exec: ToolExec) -> Shell:
        owner = owner_of(exec)
        sandbox = self.ctx.get(SANDBOX)
        mode = str(sandbox.mode(exec.session)) if sandbox is not None else None
        shell = self.shells.get(owner)
        if shell is not None and shell.alive and shell.mode == mode:
            return shell
        self.reset(owner)
        argv = ["bash", "--noprofile", "--norc"]
        if sandbox is not None and mode is not None:
            argv = await sandbox.confine(mode, exec.session, argv)
        env = {**shell_env(self.ctx, exec), "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}
        shell = await Shell.spawn(argv, current_dir(self.ctx, exec), env, mode)
        self.shells[owner] = shell
        return shell

    async def __call__(self, args: dict[str, Any], exec: ToolExec) -> str:
        shell = await self._shell(exec)
        timeout_ms = self.config.timeoutMs
        async with shell.lock:
            try:
                state, output, code = await shell.run(args["command"], timeout_ms / 1000)
            except BaseException:
                self.reset(owner_of(exec))
                raise
        if state == "done":
            return f"{clip(output)}\n[Command finished with exit code {code}]"
        self.reset(owner_of(exec))
        if state == "timeout":
            return (
                f"Your command timed out after {timeout_ms / 1000:g} seconds or experienced an OOM error. "
                f"Below is partial output:\n{clip(output)}\n[Command timed out or OOM]\n{RESET}"
            )
        lead = f"{clip(output)}\n" if output else ""
        return f"{lead}{death_marker(code)}\n{RESET}"


name = "persistent-bash"
inject = (TOOLS,)


def apply(ctx: Context, config: Config) -> None:
    """Register the persistent ``bash``; shells go with their agent and when the row unloads."""
    body = PersistentBash(ctx, config)
    ctx.require(TOOLS).register(ctx, ToolDefinition("bash", config.description, PARAMETERS, body))
    ctx.on(AGENT_DISPOSED, lambda payload: body.reset(payload["agent"].id), global_=True)
    ctx.effect(lambda: body.close_all)
