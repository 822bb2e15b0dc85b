"""``pydsh acp`` under a client that misbehaves: cancellations by request id, notifications no one handles,
ids that name nothing, a line larger than the protocol allows, and a client that stops reading."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from tests.apps.test_acp import bridge_env

REPO = Path(__file__).resolve().parents[2]
BOUND_S = 60.0
"""How long a test waits for a process that must end (a safety bound, not a performance target)."""


class RawEditor:
    """``pydsh acp`` driven by hand-written frames, reading answers line by line."""

    def __init__(self, tmp_path: Path, scripts: list[Any]) -> None:
        patch = tmp_path / "scripted.yml"
        row = {"id": "llm-replay", "name": "llm-replay", "config": {"scripts": scripts}}
        patch.write_text(yaml.safe_dump([{"insert": [row]}]))
        self.stderr = tmp_path / "stderr.txt"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydsh", "acp", "--patch", str(patch)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr.open("wb"),
            env=bridge_env(),
            cwd=tmp_path,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.threaded = False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def start_reading(self) -> RawEditor:
        """Read every frame on a thread from now on (else only when an answer is awaited)."""
        self.threaded = True
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _next_line(self, deadline: float) -> bytes:
        if not self.threaded:
            assert self.proc.stdout is not None
            return self.proc.stdout.readline()
        try:
            return self.lines.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise AssertionError(f"no frame within {BOUND_S:g} s") from None

    def send(self, frame: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = frame if isinstance(frame, bytes) else (json.dumps(frame) + "\n").encode()
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self, rid: int) -> dict[str, Any]:
        """Frames are read until the answer to ``rid`` (within the safety bound)."""
        deadline = time.monotonic() + BOUND_S
        while True:
            line = self._next_line(deadline)
            assert line, f"stdout closed before the answer to {rid}: {self.stderr.read_text()}"
            frame = json.loads(line)
            if frame.get("id") == rid and "method" not in frame:
                return dict(frame)

    def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.answer(rid)

    def new_session(self, workspace: Path) -> str:
        self.request(1, "initialize", {"protocolVersion": 1})
        created = self.request(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
        return str(created["result"]["sessionId"])

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(BOUND_S)


def test_a_cancel_request_for_a_prompt_in_flight_cancels_it(tmp_path: Path) -> None:
    editor = RawEditor(tmp_path, [{"hang": True}]).start_reading()
    sid = editor.new_session(tmp_path)
    editor.send(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]},
        }
    )
    time.sleep(0.5)
    editor.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}})
    assert editor.answer(9)["result"] == {"stopReason": "cancelled"}
    assert editor.close() == 0
    assert "Traceback" not in editor.stderr.read_text()


def test_notifications_no_one_handles_are_dropped_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    editor = RawEditor(tmp_path, []).start_reading()
    editor.request(1, "initialize", {"protocolVersion": 1})
    for _ in range(3):
        editor.send({"jsonrpc": "2.0", "method": "session/nonsense", "params": {}})
    editor.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 404}})
    editor.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"nope": True}})
    assert "result" in editor.request(2, "session/list", {})
    assert editor.close() == 0
    stderr = editor.stderr.read_text()
    assert "Traceback" not in stderr
    assert stderr.count("ignored the notification 'session/nonsense'") == 1


def test_session_ids_that_name_nothing_are_invalid_params(tmp_path: Path) -> None:
    editor = RawEditor(tmp_path, []).start_reading()
    editor.request(1, "initialize", {"protocolVersion": 1})
    cases = {
        "": "session id is empty",
        "a\nb": "session id contains the control character U+000A at index 1",
        "../../etc": "session is not resumable: ../../etc",
        "nonesuch": "session is not resumable: nonesuch",
    }
    for rid, (session_id, detail) in enumerate(cases.items(), 10):
        params = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        error = editor.request(rid, "session/resume", params)["error"]
        assert (error["code"], error["data"]["detail"]) == (-32602, detail)
    prompt = {"sessionId": "", "prompt": [{"type": "text", "text": "hi"}]}
    assert editor.request(20, "session/prompt", prompt)["error"]["code"] == -32602
    assert editor.close() == 0


def test_a_line_over_the_limit_is_discarded_and_memory_stays_bounded(tmp_path: Path) -> None:
    """A 120 MB line is dropped as it arrives (one warning) instead of being held, then the bridge serves on."""
    probe = f"""
import json, resource, subprocess, sys
proc = subprocess.Popen([sys.executable, "-m", "pydsh", "acp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, cwd={str(tmp_path)!r})
chunk = b"x" * (1 << 20)
proc.stdin.write(b'{{"junk": "')
for _ in range(120):
    proc.stdin.write(chunk)
proc.stdin.write(b'"}}\\n' + json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {{"protocolVersion": 1}}}}).encode() + b"\\n")
out, err = proc.communicate(timeout={BOUND_S})
print(json.dumps({{"code": proc.returncode, "out": out.decode(), "err": err.decode(),
                   "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=bridge_env(), timeout=BOUND_S * 2
    )
    report = json.loads(done.stdout)
    assert report["code"] == 0, report["err"]
    assert [json.loads(line)["id"] for line in report["out"].splitlines()] == [1]
    assert report["err"].count("discarded an inbound line longer than") == 1
    assert report["peak_mb"] < 200, report["peak_mb"]


def test_a_client_that_stops_reading_and_closes_stdin_does_not_hang_the_bridge(tmp_path: Path) -> None:
    """Frames never wait for the client: with stdout unread and full, end of input still ends the process."""
    editor = RawEditor(tmp_path, [{"text": "y" * 4_000_000}])
    sid = editor.new_session(tmp_path)
    editor.send(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "talk"}]},
        }
    )
    time.sleep(1.0)
    assert editor.close() == 0
