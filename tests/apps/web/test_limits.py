"""Slow clients and floods against real loopback sockets: header and body deadlines, the connection cap,
event-stream slots, and one log line per cause (issue 21 item 1)."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pydsh.apps.web.limits import Limits, Reporter
from pydsh.apps.web.state import Config
from tests.apps.web.conftest import Web, open_web
from tests.apps.web.test_cli import first_line, patch_file, stop

WAIT_S = 15
"""Bound on every wait for an expected answer or disconnect (never a performance assertion)."""


@pytest.fixture
def limits() -> Limits:
    """Short deadlines so an expected close comes quickly; a test overrides it for other limits."""
    return Limits(headerTimeoutMs=500, bodyTimeoutMs=500)


@pytest.fixture
async def web(script: list[Any], isolated_home: Path, tmp_path: Path, limits: Limits) -> AsyncIterator[Web]:
    async for rig in open_web(script, isolated_home, tmp_path, config=Config(limits=limits)):
        yield rig


def host(web: Web) -> str:
    return f"127.0.0.1:{web.server.sock.getsockname()[1]}"


def cookie(web: Web, value: str | None = None) -> str:
    """The ``Cookie`` header of the rig's sign-in (or of another minted value)."""
    name = web.server.state.signer.name
    return f"{name}={value or web.client.cookies[name]}"


async def connect(web: Web, data: bytes = b"") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", web.server.sock.getsockname()[1])
    if data:
        writer.write(data)
        await writer.drain()
    return reader, writer


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded wait)."""
    return await asyncio.wait_for(reader.read(), WAIT_S)


def error_of(answer: bytes) -> tuple[int, str]:
    """Status and error code of a raw one-line JSON error response."""
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message"} and "\n" not in error["message"]
    return status, str(error["code"])


async def status_line(reader: asyncio.StreamReader) -> int:
    line = await asyncio.wait_for(reader.readline(), WAIT_S)
    return int(line.split(b" ", 2)[1])


def stream_request(web: Web, path: str = "/api/events", value: str | None = None) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host(web)}\r\nCookie: {cookie(web, value)}\r\n\r\n".encode()


async def test_an_unfinished_request_header_gets_408_and_is_closed(web: Web) -> None:
    reader, writer = await connect(web, f"GET /api/info HTTP/1.1\r\nHost: {host(web)}\r\n".encode())
    assert error_of(await until_closed(reader)) == (408, "request_timeout")
    writer.close()


async def test_a_header_trickled_a_byte_at_a_time_is_closed(web: Web) -> None:
    reader, writer = await connect(web)
    request = f"GET /api/info HTTP/1.1\r\nHost: {host(web)}\r\nX-Pad: {'a' * 200}\r\n\r\n".encode()

    async def trickle() -> None:
        for byte in request:
            writer.write(bytes([byte]))
            await asyncio.sleep(0.05)

    sender = asyncio.ensure_future(trickle())
    try:
        assert error_of(await until_closed(reader)) == (408, "request_timeout")
    finally:
        sender.cancel()
        writer.close()


async def test_an_idle_connection_is_closed_without_an_answer(web: Web) -> None:
    reader, writer = await connect(web)
    assert await until_closed(reader) == b""
    writer.close()


async def test_a_body_trickled_a_byte_at_a_time_gets_408_and_is_closed(web: Web) -> None:
    head = (
        f"POST /api/client-errors HTTP/1.1\r\nHost: {host(web)}\r\nCookie: {cookie(web)}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    reader, writer = await connect(web, head.encode())

    async def trickle() -> None:
        for _ in range(100):
            writer.write(b" ")
            await asyncio.sleep(0.05)

    sender = asyncio.ensure_future(trickle())
    try:
        assert error_of(await until_closed(reader)) == (408, "body_timeout")
    finally:
        sender.cancel()
        writer.close()
    assert (await web.client.get("/api/info")).status_code == 200


async def test_an_unread_body_closes_the_connection_after_the_answer(web: Web) -> None:
    head = (
        f"POST /api/client-errors HTTP/1.1\r\nHost: {host(web)}\r\nCookie: {cookie(web)}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {3 * 1024 * 1024}\r\n\r\n"
    )
    reader, writer = await connect(web, head.encode() + b" " * 10)
    assert error_of(await until_closed(reader)) == (413, "body_too_large")
    writer.close()


@pytest.mark.parametrize("limits", [Limits()], ids=["defaults"])
async def test_one_client_holds_at_most_its_streams_per_client(web: Web, caplog: pytest.LogCaptureFixture) -> None:
    per_client = Limits().maxStreamsPerClient
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    with caplog.at_level(logging.WARNING, logger="pydsh.web"):
        for _ in range(per_client):
            reader, writer = await connect(web, stream_request(web))
            assert await status_line(reader) == 200
            opened.append((reader, writer))
        for _ in range(3):
            reader, writer = await connect(web, stream_request(web))
            answer = await asyncio.wait_for(reader.read(4096), WAIT_S)
            assert error_of(answer) == (429, "too_many_streams")
            writer.close()
    refusals = [r for r in caplog.records if "refused an event stream" in r.getMessage()]
    assert len(refusals) == 1
    signer = web.server.state.signer
    other = signer.mint(host(web))
    reader, writer = await connect(web, stream_request(web, value=other))
    assert await status_line(reader) == 200
    writer.close()
    opened[0][1].close()
    await until(lambda: open_streams(web) == per_client - 1)
    reader, writer = await connect(web, stream_request(web))
    assert await status_line(reader) == 200
    for _, w in [*opened[1:], (reader, writer)]:
        w.close()


def open_streams(web: Web) -> int:
    return web.server.throttle.streams.open


def busy_connections(web: Web) -> int:
    """Connections in the middle of a request (not waiting for one)."""
    live = web.server.server.server_state.connections
    return sum(1 for c in live if getattr(c, "_waiting_since", 0.0) is None and not c.transport.is_closing())


async def until(check: Any) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), WAIT_S)


@pytest.mark.parametrize("limits", [Limits(maxStreams=3, maxStreamsPerClient=2)], ids=["small"])
async def test_streams_in_total_are_capped_with_503(web: Web) -> None:
    signer = web.server.state.signer
    held = []
    for value in (None, None, signer.mint(host(web))):
        reader, writer = await connect(web, stream_request(web, value=value))
        assert await status_line(reader) == 200
        held.append(writer)
    reader, writer = await connect(web, stream_request(web, value=signer.mint(host(web))))
    assert error_of(await asyncio.wait_for(reader.read(4096), WAIT_S)) == (503, "server_busy")
    for w in [*held, writer]:
        w.close()


@pytest.mark.parametrize("limits", [Limits(maxConnections=4, bodyTimeoutMs=60_000)], ids=["four"])
async def test_the_connection_cap_closes_idle_sockets_first_then_refuses(web: Web) -> None:
    await web.client.aclose()
    idle = [await connect(web, b"GET /api/info HTTP/1.1\r\n") for _ in range(4)]
    reader, writer = await connect(web, f"GET /api/info HTTP/1.1\r\nHost: {host(web)}\r\n\r\n".encode())
    assert await status_line(reader) == 401  # served: the oldest idle socket made room
    assert await until_closed(idle[0][0]) == b""
    writer.close()
    head = (
        f"POST /api/client-errors HTTP/1.1\r\nHost: {host(web)}\r\nCookie: {cookie(web)}\r\n"
        "Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{"
    )
    busy = [await connect(web, head.encode()) for _ in range(4)]
    await until(lambda: busy_connections(web) == 4)
    reader, writer = await connect(web, f"GET /api/info HTTP/1.1\r\nHost: {host(web)}\r\n\r\n".encode())
    assert error_of(await until_closed(reader)) == (503, "server_busy")
    for _, w in [*idle, *busy, (reader, writer)]:
        w.close()


async def test_malformed_requests_are_answered_400_and_logged_once(web: Web, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        for _ in range(5):
            reader, writer = await connect(web, b"NOT HTTP AT ALL\r\n\r\n")
            assert (await until_closed(reader)).startswith(b"HTTP/1.1 400")
            writer.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("malformed HTTP request" in line for line in lines) == 1
    assert not any("Invalid HTTP request received" in line for line in lines)


async def test_accept_running_out_of_files_is_logged_once_and_recovers(
    web: Web, caplog: pytest.LogCaptureFixture
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    port = web.server.sock.getsockname()[1]
    clients: list[socket.socket] = []
    with caplog.at_level(logging.WARNING):
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(list(Path("/proc/self/fd").iterdir())) + 40, hard))
        try:
            while True:
                try:
                    client = socket.socket()
                except OSError:
                    break
                clients.append(client)
                client.connect(("127.0.0.1", port))
            await until(lambda: any("cannot accept connections" in r.getMessage() for r in caplog.records))
        finally:
            for client in clients:
                client.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert (await asyncio.wait_for(web.client.get("/api/info"), WAIT_S)).status_code == 200
    lines = [r.getMessage() for r in caplog.records]
    assert sum("cannot accept connections" in line for line in lines) == 1
    assert not any("out of system resource" in line for line in lines)


def test_the_reporter_writes_one_line_per_cause_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    reporter = Reporter(interval_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="pydsh.web"):
        for _ in range(5):
            reporter.report("a", "cause a")
        reporter.report("b", "cause b")
        now[0] = 61.0
        reporter.report("a", "cause a")
    assert [r.getMessage() for r in caplog.records] == [
        "cause a",
        "cause b",
        "cause a (4 more since the last report)",
    ]


def test_limits_fit_inside_the_open_file_limit() -> None:
    fitted = Limits().fitted(256)
    assert (fitted.maxConnections, fitted.maxStreams, fitted.maxStreamsPerClient) == (64, 32, 8)
    tight = Limits().fitted(20)
    assert (tight.maxConnections, tight.maxStreams, tight.maxStreamsPerClient) == (5, 2, 2)
    assert Limits().fitted(1_000_000) == Limits()


LIMITED = """
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
sys.argv = ["pydsh", *sys.argv[1:]]
runpy.run_module("pydsh", run_name="__main__")
"""
"""``pydsh`` with at most 256 open files (as after ``ulimit -n 256``), set before anything starts."""


def test_a_server_limited_to_256_files_outlives_300_slow_sockets(tmp_path: Path) -> None:
    """The issue's run: ``ulimit -n 256`` and 300 unfinished request lines; the API and prompts still answer."""
    stderr = tmp_path / "server.stderr"
    args = ["web", "--patch", str(patch_file(tmp_path, [{"text": "still here"}])), "--port", "0", "--no-open"]
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", LIMITED, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True
        )
    base, _, token = first_line(proc).removeprefix("pydsh web: ").strip().partition("/?token=")
    port = int(base.rsplit(":", 1)[1])
    slow = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
            sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1")
            slow.append(sock)
        with httpx.Client(base_url=base, timeout=WAIT_S) as client:
            assert client.get(f"/?token={token}").status_code == 303
            assert client.get("/api/info").status_code == 200
            body = json.dumps({"cwd": str(tmp_path), "prompt": {"text": "are you there?"}})
            created = client.post("/api/sessions", content=body, headers={"Content-Type": "application/json"})
            assert created.status_code == 201, created.text
            sid = created.json()["session"]["sessionId"]
            with client.stream("GET", f"/api/sessions/{sid}/stream") as stream:
                assert any('"type":"turn/end"' in line for line in stream.iter_lines())
        cap = Limits().fitted(256).maxConnections
        assert sum(closed_by_server(sock) for sock in slow) >= len(slow) - cap
    finally:
        for sock in slow:
            sock.close()
        code, _out, _err = stop(proc)
    assert code == 0
    log = stderr.read_text()
    assert len(log) < 20_000, log[-2000:]
    assert log.count("Too many open files") <= 1


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` by now (it closes to make room as connections arrive)."""
    sock.setblocking(False)
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
