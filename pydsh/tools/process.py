"""Child processes of the shell tools: capture with a bounded tail, spill of full streams, group kills (spec 05 §4.4).

Each stream keeps its last 64000 bytes in memory; once more was produced, the whole stream is
also written to a private spill file, whose path the kept text names.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import BinaryIO

from pydsh.tools.spill import open_spill

TAIL_BYTES = 64000
KILL_GRACE_S = 2.0
DRAIN_GRACE_S = 0.2
READ_CHUNK = 65536


def _decode_tail(data: bytes, cut: bool) -> str:
    if cut:
        skip = 0
        while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
            skip += 1
        data = data[skip:]
    return data.decode("utf-8", "replace")


class Capture:
    """One output stream: the total byte count, the kept tail and (past the limit) a spill file."""

    def __init__(self, session_id: str, name: str, limit: int = TAIL_BYTES) -> None:
        self.session_id = session_id
        self.name = name
        self.limit = limit
        self.tail = bytearray()
        self.total = 0
        self.path: str | None = None
        self._file: BinaryIO | None = None
        self._spill_tried = False

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self._file is not None:
            self._file.write(chunk)
        elif self.total > self.limit and not self._spill_tried:
            self._spill_tried = True
            try:
                self.path, self._file = open_spill(self.session_id, self.name)
                self._file.write(bytes(self.tail) + chunk)
            except OSError:
                self.path = self._file = None
        self.tail += chunk
        if len(self.tail) > self.limit:
            del self.tail[: len(self.tail) - self.limit]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The kept text, with the truncation notice when the stream outgrew the tail."""
        kept = _decode_tail(bytes(self.tail), self.truncated)
        if self.truncated:
            kept += f"\n[output truncated; full output: {self.path or '(unavailable)'}]"
        return kept

    def since(self, offset: int) -> tuple[str, bool]:
        """Text produced after byte ``offset`` and whether part of it is no longer in memory."""
        start = self.total - len(self.tail)
        dropped = offset < start
        data = bytes(self.tail[max(offset, start) - start :])
        return _decode_tail(data, dropped), dropped


class Run:
    """A started child in its own process group, its two captures and its completion task."""

    def __init__(self, proc: asyncio.subprocess.Process, stdout: Capture, stderr: Capture) -> None:
        self.proc = proc
        self.stdout = stdout
        self.stderr = stderr
        self.finished: asyncio.Task[int] = asyncio.get_running_loop().create_task(self._wait())
        self._killer: asyncio.TimerHandle | None = None

    @classmethod
    async def start(cls, argv: list[str], cwd: str, env: dict[str, str], session_id: str) -> Run:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        return cls(proc, Capture(session_id, "bash-stdout"), Capture(session_id, "bash-stderr"))

    async def _pump(self, stream: asyncio.StreamReader | None, capture: Capture) -> None:
        if stream is None:
            return
        while chunk := await stream.read(READ_CHUNK):
            capture.write(chunk)

    async def _wait(self) -> int:
        pumps = [
            asyncio.ensure_future(self._pump(self.proc.stdout, self.stdout)),
            asyncio.ensure_future(self._pump(self.proc.stderr, self.stderr)),
        ]
        try:
            code = await self.proc.wait()
            _done, pending = await asyncio.wait(pumps, timeout=DRAIN_GRACE_S)
            for pump in pending:
                pump.cancel()
            return code
        finally:
            for pump in pumps:
                pump.cancel()
            self.stdout.close()
            self.stderr.close()

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the group now and SIGKILL it if it is still running after a grace period."""
        self.signal_group(signal.SIGTERM)
        if self._killer is None:
            self._killer = asyncio.get_running_loop().call_later(KILL_GRACE_S, self._force)

    def _force(self) -> None:
        self.signal_group(signal.SIGKILL)

    async def kill(self) -> None:
        """SIGKILL the group and wait for the run to settle."""
        self.signal_group(signal.SIGKILL)
        await asyncio.shield(self.finished)
