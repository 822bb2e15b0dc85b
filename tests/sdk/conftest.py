"""SDK test rig: a loopback mock model on its own loop thread, raw wire capture, and both clients.

The published client is synchronous, so the mock serves from a background event loop; our
client is driven through its blocking facade in the shared conformance cases. ``wire`` records
every stdout line either client read, so each case can check the stream is pure JSON-RPC.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deepseek_harness
import deepseek_harness.client as published_client
import pytest

import pydsh.sdk.client as our_client
from pydsh.testing.mock_model_server import MockModelServer
from pydsh.wire.framing import decode_line

REPO = Path(__file__).resolve().parents[2]
PYDSH = str(Path(sys.executable).parent / "pydsh")
SAFETY_S = 60.0


class ThreadedMock:
    """A :class:`MockModelServer` on a private loop thread (usable from blocking code)."""

    def __init__(self, sequence: list[Any], **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = MockModelServer(sequence=sequence, **options)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


@pytest.fixture
def mock() -> Iterator[Callable[..., ThreadedMock]]:
    """``mock([behaviours...])`` starts a loopback model; all are closed after the test."""
    started: list[ThreadedMock] = []

    def start(sequence: list[Any], **options: Any) -> ThreadedMock:
        server = ThreadedMock(sequence, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


@pytest.fixture
def home() -> Path:
    return Path(os.environ["DSH_HOME"])


# -- wire capture ------------------------------------------------------------------------------


class _TeeLines:
    """Text stdout of a Popen that records every line the published client's reader consumes."""

    def __init__(self, inner: Any, lines: list[str]) -> None:
        self._inner = inner
        self._lines = lines

    def __iter__(self) -> Iterator[str]:
        for line in self._inner:
            self._lines.append(line)
            yield line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class Wire:
    """Raw stdout lines of every runtime started in a test, and the published client's processes."""

    lines: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)
    argv: list[list[str]] = field(default_factory=list)
    envs: list[dict[str, str]] = field(default_factory=list)

    def frames(self) -> list[dict[str, Any]]:
        """Every line as a frame; fails unless each one is a JSON-RPC 2.0 object."""
        out = []
        for line in self.lines:
            frame = json.loads(line)
            assert isinstance(frame, dict) and frame.get("jsonrpc") == "2.0", line
            assert "method" in frame or "id" in frame, line
            out.append(frame)
        return out

    def notifications(self, method: str | None = None) -> list[dict[str, Any]]:
        return [f for f in self.frames() if "id" not in f and (method is None or f["method"] == method)]

    def events(self, session_id: str) -> list[dict[str, Any]]:
        return [
            f["params"]["event"] for f in self.notifications("session.event") if f["params"]["sessionId"] == session_id
        ]


def went_idle(frames: list[dict[str, Any]], session_id: str) -> bool:
    """Whether ``session_id`` reported ``idle`` after reporting ``running``."""
    statuses = [
        f["params"]["status"]
        for f in frames
        if f.get("method") == "session.status" and f["params"]["sessionId"] == session_id
    ]
    return "running" in statuses and "idle" in statuses[statuses.index("running") :]


def hold_until_idle(
    frames: Callable[[], list[dict[str, Any]]], session_id: str, prompt: str
) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """A mock ``hold``: requests of the session started with ``prompt`` wait until ``session_id`` went idle.

    The mock answers in arrival order, so a subagent could otherwise settle while its parent is still
    in its first turn; its settlement notice would then join that turn instead of starting the next.
    """

    async def hold(body: dict[str, Any]) -> None:
        if body["messages"][0]["content"][0].get("text") != prompt:
            return
        deadline = time.monotonic() + SAFETY_S
        while not went_idle(frames(), session_id) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    return hold


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    record = Wire()
    base = subprocess.Popen

    class RecordingPopen(base):  # type: ignore[misc,valid-type]
        def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
            super().__init__(args, *rest, **kwargs)
            record.argv.append(list(args))
            record.envs.append(dict(kwargs.get("env") or {}))
            if kwargs.get("text") and self.stdout is not None:
                record.procs.append(self)
                self.stdout = _TeeLines(self.stdout, record.lines)

    monkeypatch.setattr(published_client.subprocess, "Popen", RecordingPopen)

    def recording_decode(line: bytes) -> Any:
        record.lines.append(line.decode("utf-8", "replace"))
        return decode_line(line)

    monkeypatch.setattr(our_client, "decode_line", recording_decode)
    return record


# -- the two clients ---------------------------------------------------------------------------


@dataclass
class ClientKind:
    """One of the two clients behind a common blocking surface."""

    name: str
    ws: Path
    home: Path
    wire: Wire

    @property
    def json_rpc_error(self) -> type[Exception]:
        return deepseek_harness.client.JsonRpcError if self.name == "published" else our_client.JsonRpcError

    def harness(self, base_url: str | None = None, **options: Any) -> Any:
        """A harness of this client; its close waits up to the safety bound (exit speed is bench/sdk.py's)."""
        common = {"dsh_bin": PYDSH, "dsh_home": str(self.home), "cwd": str(self.ws), "api_key": "sk-test"}
        if base_url is not None:
            common["base_url"] = base_url
        env = {"PYTHONPATH": str(REPO), **options.pop("env", {})}
        if self.name == "published":
            options.setdefault("shutdown_timeout_seconds", SAFETY_S)
            return deepseek_harness.DeepSeekHarness(**common, env=env, **options)
        options.setdefault("shutdown_timeout", SAFETY_S)
        return our_client.Harness(**common, env=env, **options)

    def session(self, harness: Any, session_id: str) -> Any:
        return harness.start_session(session_id) if self.name == "published" else harness.session(session_id)

    def exit_code(self, harness: Any) -> int | None:
        if self.name == "published":
            return self.wire.procs[-1].wait(SAFETY_S)
        proc = harness.client.proc
        return None if proc is None else proc.returncode


@pytest.fixture(params=["published", "ours"])
def client(request: pytest.FixtureRequest, ws: Path, home: Path, wire: Wire) -> ClientKind:
    return ClientKind(request.param, ws, home, wire)


# -- raw peer ----------------------------------------------------------------------------------


class Raw:
    """``python -m pydsh.sdk`` driven with hand-written NDJSON; every stdout line is kept."""

    def __init__(self, ws: Path, base_url: str | None = None, args: tuple[str, ...] = (), **env: str) -> None:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "DEEPSEEK_API_KEY": "sk-test", **env}
        if base_url is not None:
            full_env["DEEPSEEK_BASE_URL"] = base_url
        self.ws = ws
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydsh.sdk", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=ws,
        )
        self.lines: list[bytes] = []
        self.stderr: list[bytes] = []
        self._cond = threading.Condition()
        self._eof = False
        self._inits = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_err, daemon=True)
        self._stderr_reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, *messages: dict[str, Any] | bytes) -> None:
        """Write messages (dicts as compact JSON lines, bytes verbatim) in one write."""
        data = b"".join(m if isinstance(m, bytes) else (json.dumps(m) + "\n").encode() for m in messages)
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def frames(self) -> list[dict[str, Any]]:
        with self._cond:
            lines = list(self.lines)
        out = []
        for line in lines:
            frame = json.loads(line)
            assert isinstance(frame, dict) and frame.get("jsonrpc") == "2.0", line
            out.append(frame)
        return out

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], Any]) -> Any:
        """Block until ``predicate(frames)`` is truthy (or fail after the safety bound)."""
        deadline = time.monotonic() + SAFETY_S
        with self._cond:
            while True:
                value = predicate(self.frames())
                if value:
                    return value
                assert not self._eof, self._exited()
                assert time.monotonic() < deadline, f"no such frame within the safety bound; last: {self.lines[-8:]}"
                self._cond.wait(0.5)

    def _exited(self) -> str:
        """Why the awaited frame never came: the exit code, the stderr tail and the last frames."""
        code = self.proc.wait(SAFETY_S)
        self._stderr_reader.join(SAFETY_S)
        return f"stdout closed (exit {code}); stderr: {b''.join(self.stderr).decode()[-2000:]}; last: {self.lines[-8:]}"

    def response(self, rid: str | int) -> dict[str, Any]:
        def find(frames: list[dict[str, Any]]) -> dict[str, Any] | None:
            return next((f for f in frames if f.get("id") == rid and "method" not in f), None)

        frame: dict[str, Any] = self.wait_for(find)
        return frame

    def request(self, rid: str | int, method: str, params: Any = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(rid)

    def initialize(self, **params: Any) -> dict[str, Any]:
        full = {"cwd": str(self.ws), "provider": "deepseek-official", "model": "deepseek-v4-flash", **params}
        # a fresh id each time: waiting for "init" again would find the first answer and not wait at all
        return self.request(f"init-{next(self._inits)}", "initialize", full)

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self) -> int:
        code = self.proc.wait(SAFETY_S)
        with self._cond:
            self._cond.wait_for(lambda: self._eof, SAFETY_S)
        self._stderr_reader.join(SAFETY_S)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def raw(ws: Path) -> Iterator[Callable[..., Raw]]:
    """``raw(base_url=None, *args, **env)`` spawns a raw peer; killed after the test if still alive."""
    peers: list[Raw] = []

    def spawn(base_url: str | None = None, args: tuple[str, ...] = (), **env: str) -> Raw:
        peer = Raw(ws, base_url, args, **env)
        peers.append(peer)
        return peer

    yield spawn
    for peer in peers:
        peer.stop()


def error_of(frame: dict[str, Any]) -> str:
    """The message of an error response (and a check that it has exactly the allowed shape)."""
    assert set(frame) == {"jsonrpc", "id", "error"}, frame
    assert set(frame["error"]) == {"code", "message"}, frame
    assert frame["error"]["code"] == -32603
    message: str = frame["error"]["message"]
    return message


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say once, in the summary, that the reference runtime tests were skipped and what to install."""
    from tests.sdk.reference import SKIP_REASON

    skipped = terminalreporter.stats.get("skipped", [])
    if any(SKIP_REASON in str(getattr(report, "longrepr", "")) for report in skipped):
        terminalreporter.write_line(SKIP_REASON)
