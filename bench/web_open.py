"""``pydsh web`` benchmark, server side: start → first page, opening a 10,000-event session, idle RSS.

Run: python bench/web_open.py [--runs 5] [--events 10000]

1. start: spawns ``python -m pydsh web --port 0 --no-open`` (scripted model, fresh ``DSH_HOME``) and
   times spawn → URL line and spawn → first page served (token exchange, then ``GET /`` with the
   cookie answered 200); median of ``--runs`` after one warm-up start. Byte-code caching is on for
   the server, as in an installed package; the load average is printed, since a busy machine
   stretches wall times (the server's CPU time is printed too).
2. long session: seeds a stored session of about ``--events`` events (turns of nine ``read`` calls
   and an answer) and times what the page fetches to open it: ``GET /api/sessions/{id}`` and
   ``GET /api/sessions/{id}/events?tail=turns:2``, plus the stream's replay up to ``hello`` + tail.
3. idle RSS: after a tour of the API (sessions created and prompted, lists, streams, log download)
   the server's resident set once idle.

Browser measurements (navigation → last turn painted) extend this script: ``Server`` starts and
stops the process, ``signed_in`` gives a client with the cookie, ``seed_long_session`` the session.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from pydsh.testing.hosts import ScriptedHost, scripted_patch

JSON = {"Content-Type": "application/json"}
ANSWER = {"text": "done"}
WIDE_WINDOW = [
    {
        "id": "deepseek-official",
        "name": "DeepSeek (scripted)",
        "models": [{"id": "deepseek-v4-flash", "contextWindow": 100_000_000}],
    }
]
"""The seeding route: a window no long session reaches, so seeding never compacts."""
RUNNING: list[subprocess.Popen[str]] = []
"""Servers not stopped yet; killed at exit if a measurement fails half-way."""


@atexit.register
def _kill_leftovers() -> None:
    for proc in RUNNING:
        proc.kill()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """One ``pydsh web`` process with its own home and a scripted model."""

    def __init__(self, home: Path, workspace: Path, script: list[Any]) -> None:
        patch = home / "bench-scripted.yml"
        patch.write_text(yaml.safe_dump(scripted_patch(script)))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["DSH_HOME"] = str(home)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydsh", "web", "--patch", str(patch), "--port", "0", "--no-open"],
            cwd=workspace,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        RUNNING.append(self.proc)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url_after = time.perf_counter() - self.started
        if not line.startswith("pydsh web: "):
            self.proc.kill()
            raise SystemExit(f"pydsh web printed no URL line: {line!r}")
        self.url = line.removeprefix("pydsh web: ").strip()
        self.base, _, self.token = self.url.partition("/?token=")

    @contextlib.contextmanager
    def signed_in(self) -> Iterator[httpx.Client]:
        """A client holding the auth cookie."""
        with httpx.Client(base_url=self.base, timeout=60) as client:
            client.get(f"/?token={self.token}")
            yield client

    def cpu_s(self) -> float:
        """User + system CPU seconds the server used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> float:
        """SIGTERM → exit, in seconds."""
        began = time.perf_counter()
        self.proc.terminate()
        self.proc.wait(timeout=15)
        RUNNING.remove(self.proc)
        return time.perf_counter() - began


def first_page(home: Path, workspace: Path) -> tuple[float, float, float, float, int]:
    """(spawn → URL line s, spawn → first page s, server CPU s by then, SIGTERM → exit s, status of ``GET /``)."""
    server = Server(home, workspace, [ANSWER])
    with server.signed_in() as client:
        status = client.get("/").status_code
        page = time.perf_counter() - server.started
    cpu = server.cpu_s()
    return server.url_after, page, cpu, server.stop(), status


def tool_turns(turns: int) -> list[Any]:
    """Each turn: nine ``read`` calls, then an answer (ten steps)."""
    read = {"tool_calls": [{"name": "read", "arguments": {"file_path": "hello.txt"}}]}
    return ([read] * 9 + [ANSWER]) * turns


async def seed_long_session(home: Path, workspace: Path, events: int) -> tuple[str, int]:
    """A stored root session of at least ``events`` events; (its id, its event count)."""
    per_turn = 80
    turns = max(1, events // per_turn + 1)
    async with ScriptedHost(
        tool_turns(turns), profile="web", cwd=workspace, dsh_home=home, providers=WIDE_WINDOW
    ) as host:
        agent = await host.create_agent()
        while len(agent.events) < events:
            await agent.run("Read hello.txt nine times, then say done.")
        count = len(agent.events)
        session_id = agent.session_id
        await agent.close()
    return session_id, count


def open_long_session(home: Path, workspace: Path, session_id: str) -> dict[str, float]:
    """Seconds for what the page fetches to open the session, on a fresh server."""
    server = Server(home, workspace, [ANSWER])
    out: dict[str, float] = {}
    with server.signed_in() as client:
        began = time.perf_counter()
        assert client.get(f"/api/sessions/{session_id}").status_code == 200
        out["session"] = time.perf_counter() - began
        began = time.perf_counter()
        tail = client.get(f"/api/sessions/{session_id}/events", params={"tail": "turns:2"}).json()
        out["tail"] = time.perf_counter() - began
        began = time.perf_counter()
        with client.stream("GET", f"/api/sessions/{session_id}/stream", params={"after": tail["lastSeq"]}) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: hello"):
                    break
        out["stream hello"] = time.perf_counter() - began
        out["tail events"] = len(tail["events"])
    server.stop()
    return out


def tour(server: Server, workspace: Path) -> None:
    """Create and prompt sessions, list them, follow their streams, download a log."""
    with server.signed_in() as client:
        ids = []
        for i in range(3):
            body = {"cwd": str(workspace), "prompt": {"text": f"tour prompt {i}"}}
            ids.append(
                client.post("/api/sessions", content=json.dumps(body), headers=JSON).json()["session"]["sessionId"]
            )
        for sid in ids:
            with client.stream("GET", f"/api/sessions/{sid}/stream") as stream:
                for line in stream.iter_lines():
                    if '"type":"turn/end"' in line:
                        break
            client.get(f"/api/sessions/{sid}")
            client.get(f"/api/sessions/{sid}/events", params={"tail": "turns:2"})
            client.get(f"/api/sessions/{sid}/agents")
            client.get(f"/api/sessions/{sid}/log")
        for path in ("/api/sessions", "/api/known-workspaces", "/api/info", "/api/models", "/api/settings"):
            client.get(path)


def idle_rss(home: Path, workspace: Path) -> float:
    server = Server(home, workspace, tool_turns(3))
    tour(server, workspace)
    threading.Event().wait(1.0)
    rss = rss_mb(server.proc.pid)
    server.stop()
    return rss


def workspace_in(root: Path) -> Path:
    workspace = root / "work"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "hello.txt").write_text("hello world\nsecond line\n")
    return workspace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-web-"))
    workspace = workspace_in(root)

    first_page(Path(tempfile.mkdtemp(dir=root)), workspace)
    starts = [first_page(Path(tempfile.mkdtemp(dir=root)), workspace) for _ in range(args.runs)]
    url, page, cpu, stop, status = (statistics.median(col) for col in zip(*starts, strict=True))
    note = "" if status == 200 else f"  (GET / answered {int(status)}: the page files are not in this tree)"
    print(f"load average            {os.getloadavg()[0]:7.2f}      (on {os.cpu_count()} cores)")
    print(f"start → URL line        {url * 1000:7.0f} ms  (median of {args.runs})")
    print(f"start → first page      {page * 1000:7.0f} ms  (target < 1000 ms){note}")
    print(f"  server CPU by then    {cpu * 1000:7.0f} ms  (user + system)")
    print(f"SIGTERM → exit          {stop * 1000:7.0f} ms")

    home = Path(tempfile.mkdtemp(dir=root))
    began = time.perf_counter()
    session_id, count = asyncio.run(seed_long_session(home, workspace, args.events))
    print(f"seeded a {count}-event session in {time.perf_counter() - began:.1f} s")
    opened = open_long_session(home, workspace, session_id)
    print(f"  GET /api/sessions/{{id}}        {opened['session'] * 1000:7.0f} ms")
    print(f"  GET …/events?tail=turns:2      {opened['tail'] * 1000:7.0f} ms  ({int(opened['tail events'])} events)")
    print(f"  stream → hello                 {opened['stream hello'] * 1000:7.0f} ms")

    rss = idle_rss(Path(tempfile.mkdtemp(dir=root)), workspace)
    print(f"idle RSS after the API tour  {rss:6.1f} MB  (target ≤ 100 MB; reference web process ≈ 400 MB)")


if __name__ == "__main__":
    main()
