"""``pydsh web`` as a subprocess: the URL line, the loopback rule, port errors, clean SIGINT/SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from pydsh.testing.hosts import scripted_patch
from tests.logs import log_lines, stored_log

URL_PREFIX = "pydsh web: http://"


def patch_file(tmp_path: Path, script: list[Any]) -> Path:
    path = tmp_path / "scripted.yml"
    path.write_text(yaml.safe_dump(scripted_patch(script)))
    return path


def start(tmp_path: Path, *args: str, script: list[Any] | None = None) -> subprocess.Popen[str]:
    patch = patch_file(tmp_path, script or [{"text": "hi"}])
    return subprocess.Popen(
        [sys.executable, "-m", "pydsh", "web", "--patch", str(patch), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_line(proc: subprocess.Popen[str], timeout: float = 20) -> str:
    """The first stdout line, or a failure with stderr if the process ends first."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline() if proc.stdout else ""))
    reader.start()
    reader.join(timeout)
    if not lines or not lines[0]:
        proc.kill()
        _out, err = proc.communicate()
        pytest.fail(f"no URL line; stderr: {err}")
    return lines[0]


def stop(proc: subprocess.Popen[str], signum: int = signal.SIGTERM) -> tuple[int, str, str]:
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_one_url_line_then_a_clean_exit_on_signal(tmp_path: Path, signum: int) -> None:
    proc = start(tmp_path, "--port", "0", "--no-open")
    line = first_line(proc)
    assert line.startswith(URL_PREFIX) and line.endswith("\n")
    url = line.removeprefix("pydsh web: ").strip()
    base, _, token = url.partition("/?token=")
    assert base.startswith("http://127.0.0.1:") and not base.endswith(":0") and len(token) >= 40
    with httpx.Client(base_url=base) as client:
        assert client.get(f"/?token={token}").status_code == 303
        assert client.get("/api/info").json()["profile"] == "web"
    code, out, err = stop(proc, signum)
    assert code == 0, err
    assert out == ""


def test_sigterm_cancels_the_running_turn_and_keeps_the_log(tmp_path: Path, isolated_home: Path) -> None:
    proc = start(tmp_path, "--port", "0", "--no-open", script=[{"hang": True}])
    url = first_line(proc).removeprefix("pydsh web: ").strip()
    base, _, token = url.partition("/?token=")
    with httpx.Client(base_url=base) as client:
        client.get(f"/?token={token}")
        body = {"cwd": str(tmp_path), "prompt": {"text": "wait forever"}}
        created = client.post("/api/sessions", content=json.dumps(body), headers={"Content-Type": "application/json"})
        sid = created.json()["session"]["sessionId"]
        with client.stream("GET", f"/api/sessions/{sid}/stream") as stream:
            for line in stream.iter_lines():
                if '"type":"step/start"' in line:
                    break
    code, _out, err = stop(proc)
    assert code == 0, err
    rows = [json.loads(line) for line in log_lines(stored_log(isolated_home / "sessions"))]
    assert rows[0]["id"] == sid
    ends = [r["data"]["reason"]["kind"] for r in rows[1:] if r["type"] == "turn/end"]
    assert ends == ["aborted"]


def test_a_public_host_is_refused_before_binding(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path, "--host", "0.0.0.0", "--port", str(port), "--no-open")
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 2
    assert err.strip().endswith(
        "refusing to listen on 0.0.0.0: it is reachable from other machines; pass --allow-public if you mean it"
    )
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_another_loopback_address_starts(tmp_path: Path) -> None:
    proc = start(tmp_path, "--host", "127.0.0.2", "--port", "0", "--no-open")
    assert first_line(proc).startswith("pydsh web: http://127.0.0.2:")
    assert stop(proc)[0] == 0


def test_allow_public_starts_and_warns(tmp_path: Path) -> None:
    proc = start(tmp_path, "--allow-public", "--host", "0.0.0.0", "--port", "0", "--no-open")
    assert first_line(proc).startswith("pydsh web: http://0.0.0.0:")
    code, _out, err = stop(proc)
    assert code == 0
    assert "warning: listening on 0.0.0.0, reachable from other machines" in err


def test_a_port_in_use_exits_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start(tmp_path, "--port", str(port), "--no-open")
        _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert err.strip().endswith(f"port {port} is in use; pass --port 0 for any free port")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "port 70000 is outside 0-65535"),
        (["--cwd", "no/such/dir"], "is not an existing directory"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = start(tmp_path, *args)
    _out, err = proc.communicate(timeout=20)
    assert proc.returncode == 2
    assert message in err


def test_sigterm_with_open_streams_exits_0_within_5_seconds(tmp_path: Path) -> None:
    proc = start(tmp_path, "--port", "0", "--no-open")
    base, _, token = first_line(proc).removeprefix("pydsh web: ").strip().partition("/?token=")
    with httpx.Client(base_url=base, timeout=10) as client:
        client.get(f"/?token={token}")
        body = json.dumps({"cwd": str(tmp_path), "prompt": {"text": "hi"}})
        sid = client.post("/api/sessions", content=body, headers={"Content-Type": "application/json"}).json()
        with (
            client.stream("GET", "/api/events") as index,
            client.stream("GET", f"/api/sessions/{sid['session']['sessionId']}/stream") as session,
        ):
            assert index.status_code == session.status_code == 200
            proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            proc.wait(timeout=5)
            assert proc.returncode == 0
            assert time.monotonic() - began < 5


def test_help_and_the_web_profile_composition(tmp_path: Path) -> None:
    shown = subprocess.run([sys.executable, "-m", "pydsh", "web", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "--allow-public" in shown.stdout
    dumped = subprocess.run(
        [sys.executable, "-m", "pydsh", "web", "--dump-config"], capture_output=True, text=True, timeout=60
    )
    assert dumped.returncode == 0, dumped.stderr
    ids = [row["id"] for row in yaml.safe_load(dumped.stdout)]
    assert {"agent-presets", "preset-standard", "web-app", "user-questions", "approval"} <= set(ids)
    standard = next(r for r in yaml.safe_load(dumped.stdout) if r["id"] == "preset-standard")
    ask = next(p for p in standard["config"]["plugins"] if p["id"] == "tool-ask-user")
    assert not ask.get("disabled")
