"""Bounded buffers of the SDK server (issue: a slow client must slow the server down, not grow it).

The frame writer holds at most its high-water mark before producers wait, admission locks live
only while requests use them, and a model streaming to a client that stops reading is held back.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pydsh.apps.sdk.server import AdmissionLocks
from pydsh.apps.stdio import OUTBOUND_HIGH_WATER, PIPE_SIZE, FrameWriter
from tests.sdk import plugins
from tests.sdk.conftest import REPO, SAFETY_S


def drain_in_thread(fd: int, into: bytearray) -> threading.Thread:
    def read() -> None:
        while chunk := os.read(fd, 1 << 16):
            into.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


async def test_frame_writer_holds_producers_above_the_high_water_mark_and_flush_drains_all() -> None:
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd, lambda: None)
    await writer.open()
    await writer.writable()
    payload = b"x" * (PIPE_SIZE + OUTBOUND_HIGH_WATER + (1 << 18)) + b"\n"  # more than the pipe and the buffer
    writer.write(payload)
    waiting = asyncio.ensure_future(writer.writable())
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    received = bytearray()
    reader = drain_in_thread(read_fd, received)
    await asyncio.wait_for(waiting, SAFETY_S)
    writer.write(b"last\n")
    await asyncio.wait_for(writer.flush(), SAFETY_S)
    writer.close()
    await asyncio.sleep(0)
    reader.join(SAFETY_S)
    os.close(read_fd)
    assert bytes(received) == payload + b"last\n"


async def test_frame_writer_widens_its_pipe() -> None:
    """A busy loop writes at most a pipe's worth of frames per turn: 64 KiB let them back up behind the
    session steps (a cheap answer waited seconds behind 11 MB of frames with 500 sessions stepping)."""
    read_fd, write_fd = os.pipe()
    writer = FrameWriter(write_fd, lambda: None)
    await writer.open()
    try:
        assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) >= PIPE_SIZE
    finally:
        writer.close()
        await asyncio.sleep(0)
        os.close(read_fd)


async def test_admission_locks_keep_arrival_order_and_vanish_when_unused() -> None:
    locks = AdmissionLocks()
    order: list[int] = []

    async def admit(n: int) -> None:
        async with locks.hold("s"):
            order.append(n)
            await asyncio.sleep(0)

    await asyncio.gather(*(admit(n) for n in range(5)))
    assert order == [0, 1, 2, 3, 4]
    assert len(locks) == 0

    held = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("s"):
            held.set()
            await release.wait()

    first = asyncio.ensure_future(holder())
    await held.wait()
    waiter = asyncio.ensure_future(admit(9))
    await asyncio.sleep(0)
    assert len(locks) == 1
    waiter.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(locks) == 0 and order == [0, 1, 2, 3, 4]


def test_a_client_that_stops_reading_holds_the_model_stream_back(ws: Path, tmp_path: Path) -> None:
    patch = tmp_path / "model.yml"
    patch.write_text(json.dumps([{"insert": [{"id": "model", "name": "tests.sdk.plugins:streaming_model"}]}]))
    env = {**os.environ, "PYTHONPATH": str(REPO), "DEEPSEEK_API_KEY": "sk-test"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pydsh.sdk", "--patch", str(patch)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ws,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    pulled = [0]

    def watch_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(b"pulled "):
                pulled[0] = int(line.split()[1])

    threading.Thread(target=watch_stderr, daemon=True).start()
    try:
        init = {"cwd": str(ws), "provider": "deepseek-official", "model": "deepseek-v4-flash"}
        init["pydshExtensions"] = {"deltas": True}
        prompt = {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "go"}]}
        for rid, method, params in (("i", "initialize", init), ("p", "session/prompt", prompt)):
            proc.stdin.write(
                (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()
            )
        proc.stdin.flush()
        deadline = time.monotonic() + SAFETY_S
        while pulled[0] < plugins.STREAM_BLOCK:
            assert time.monotonic() < deadline, "the model stream never started"
            time.sleep(0.05)
        time.sleep(3)
        # Unread frames are bounded by the pipe and the writer's high-water mark (about 9,000 deltas).
        assert pulled[0] <= 20 * plugins.STREAM_BLOCK, pulled[0]

        deltas = 0
        for line in proc.stdout:
            frame = json.loads(line)
            deltas += frame.get("method") == "pydsh.session.delta"
            if frame.get("method") == "session.status" and frame["params"] == {"sessionId": "t1", "status": "idle"}:
                break
        assert deltas == plugins.STREAM_DELTAS
        proc.stdin.write(b'{"jsonrpc":"2.0","id":"bye","method":"shutdown"}\n')
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()) == {"jsonrpc": "2.0", "id": "bye", "result": {}}
        assert proc.wait(SAFETY_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
