"""``pydsh web`` benchmark: start → first page, opening a 10,000-event session, the page during heavy live
turns, and the server's memory.

Run: python bench/web_open.py [--runs 5] [--events 10000]

1. start: spawns ``python -m pydsh web --port 0 --no-open`` (scripted model, fresh ``DSH_HOME``) and
   times spawn → URL line and spawn → first page served (token exchange, then ``GET /`` with the
   cookie answered 200); median of ``--runs`` after one warm-up start. Byte-code caching is on for
   the server, as in an installed package; the load average is printed, since a busy machine
   stretches wall times (the server's CPU time is printed too).
2. long session: writes a stored session of about ``--events`` events straight to disk (two real turns
   of nine ``read`` calls and an answer, the last one copied to the length) and times what the page
   fetches to open it: ``GET /api/sessions/{id}`` and ``GET /api/sessions/{id}/events?tail=turns:2``,
   plus the stream's replay up to ``hello`` + tail.
3. idle RSS: after a tour of the API (sessions created and prompted, lists, streams, log download)
   the server's resident set once idle.
4. heavy tour, in headless Chromium (the distribution's ``chromium``, never a downloaded one) against
   the real DeepSeek adapter talking to the loopback mock model (in this process, so the server holds
   no script): a live turn of 1,500 ``read`` calls (50 per step), then a 5 MB Markdown answer streamed
   in 1 KB deltas, each sent from the composer — the longest main-thread task while it ran (a
   ``longtask`` PerformanceObserver installed before the page's code) and how long after the server's
   ``turn/end`` the page showed the finished turn; then navigation to the long session → its last
   turn painted (the turn-end row of the newest turn visible): the first (cold) open, then the median
   of ``--runs`` more; then its Trajectory; finally the server's peak RSS and its RSS once idle (after a
   stored read's grace past its last stream, ``RELEASE_DELAY_S``, and the memory trim that follows).
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.apps.web.streams import RELEASE_DELAY_S, TRIM_DELAY_S  # noqa: E402
from pydsh.testing.hosts import scripted_patch  # noqa: E402
from pydsh.testing.mock_model_server import MockModelServer  # noqa: E402
from tests.apps.web.browser.perf import (  # noqa: E402
    PROBE,
    Probe,
    markdown_answer,
    seed_long_session,
    tool_turn,
    turn_end_time,
)

JSON = {"Content-Type": "application/json"}
ANSWER = {"text": "done"}
RUNNING: list[subprocess.Popen[str]] = []
"""Servers not stopped yet; killed at exit if a measurement fails half-way."""


@atexit.register
def _kill_leftovers() -> None:
    for proc in RUNNING:
        proc.kill()


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The process's resident set (``VmHWM``: its peak so far) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """One ``pydsh web`` process with its own home and a scripted model."""

    def __init__(self, home: Path, workspace: Path, script: list[Any] | None, model_url: str | None = None) -> None:
        """``script`` for the scripted model, else the DeepSeek adapter talking to the mock at ``model_url``."""
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["DSH_HOME"] = str(home)
        args = [sys.executable, "-m", "pydsh", "web", "--port", "0", "--no-open"]
        if script is not None:
            patch = home / "bench-scripted.yml"
            patch.write_text(yaml.safe_dump(scripted_patch(script)))
            args[4:4] = ["--patch", str(patch)]
        if model_url is not None:
            env.update(DEEPSEEK_BASE_URL=model_url, DEEPSEEK_API_KEY="bench-key")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            args,
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


def chromium() -> str | None:
    """The distribution's Chromium (override with PYDSH_CHROMIUM)."""
    import shutil

    return os.environ.get("PYDSH_CHROMIUM") or shutil.which("chromium")


class MockModel:
    """The loopback mock model on its own event loop in a thread of this process."""

    def __init__(self, sequence: list[Any], **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = MockModelServer(sequence, **options)
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def live_turn(page: Any, client: httpx.Client, text: str) -> tuple[float, float]:
    """Send ``text`` from the composer and wait for the page to show the finished turn: (longest main-thread
    task in ms, seconds from the server's ``turn/end`` to the page showing it)."""
    probe = Probe(page)
    probe.arm()
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")
    shown = probe.wait_finished(timeout=600)
    sid = page.evaluate("decodeURIComponent(location.hash.split('/').pop())")
    events = client.get(f"/api/sessions/{sid}/events", params={"tail": "turns:1"}).json()["events"]
    return probe.longest_task_ms(), shown - turn_end_time(events)


def heavy_tour(home: Path, workspace: Path, session_id: str, runs: int) -> dict[str, Any]:
    """The browser measurements of part 4 and the server's peak and idle RSS after them."""
    from playwright.sync_api import sync_playwright

    mock = MockModel([*tool_turn(), {"text": markdown_answer()}], chunkSize=1024)
    server = Server(home, workspace, None, model_url=mock.server.base_url)
    out: dict[str, Any] = {"painted": []}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium(), headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            context.add_init_script(PROBE)
            page = context.new_page()
            page.goto(server.url)
            page.wait_for_selector("#new-session")
            cookies = {c["name"]: c["value"] for c in context.cookies()}
            client = httpx.Client(base_url=server.base, cookies=cookies, timeout=60)
            out["tools"] = live_turn(page, client, "Read hello.txt 1,500 times.")
            page.locator("#new-session").click()
            out["answer"] = live_turn(page, client, "Write a 5 MB answer.")
            target = f"{server.base}/#/session/{session_id}"
            for _ in range(runs + 1):
                page.goto("about:blank")
                began = time.perf_counter()
                page.goto(target)
                page.locator("#conversation .turn:last-child .turn-end").wait_for()
                page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
                out["painted"].append(time.perf_counter() - began)
            page.locator("#tab-trajectory").click()
            page.locator(".traj-row").first.wait_for()
            browser.close()
            client.close()
        # idle: once the long session's read has outlived its last stream and the freed memory went back
        threading.Event().wait(RELEASE_DELAY_S + TRIM_DELAY_S + 1.0)
        out["peak"] = rss_mb(server.proc.pid, "VmHWM")
        out["idle"] = rss_mb(server.proc.pid)
    finally:
        server.stop()
        mock.close()
    return out


def task_ms(longest: float) -> str:
    """The longest task for printing: the ``longtask`` observer reports only tasks of 50 ms or more."""
    return f"{longest:7.0f} ms" if longest else "   < 50 ms"


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
    session_id, count = seed_long_session(home, workspace, args.events)
    print(f"wrote a {count}-event session in {time.perf_counter() - began:.1f} s")
    opened = open_long_session(home, workspace, session_id)
    print(f"  GET /api/sessions/{{id}}        {opened['session'] * 1000:7.0f} ms")
    print(f"  GET …/events?tail=turns:2      {opened['tail'] * 1000:7.0f} ms  ({int(opened['tail events'])} events)")
    print(f"  stream → hello                 {opened['stream hello'] * 1000:7.0f} ms")

    rss = idle_rss(Path(tempfile.mkdtemp(dir=root)), workspace)
    print(f"idle RSS after the API tour  {rss:6.1f} MB  (target ≤ 100 MB; reference web process ≈ 400 MB)")

    if chromium() is None:
        print("browser: Chromium not found; install it with `apt-get install chromium` (or set PYDSH_CHROMIUM)")
        return
    tour = heavy_tour(home, workspace, session_id, args.runs)
    longest, lag = tour["tools"]
    print(f"live 1,500-tool-call turn: longest task {task_ms(longest)}  (target ≤ 100 ms)")
    print(f"  page finished after the server  {lag * 1000:7.0f} ms  (target ≤ 1000 ms)")
    longest, lag = tour["answer"]
    print(f"5 MB streamed answer: longest task {task_ms(longest)}  (target ≤ 100 ms)")
    print(f"  page finished after the server  {lag * 1000:7.0f} ms")
    painted = tour["painted"]
    print(
        f"navigation → last turn painted  {painted[0] * 1000:7.0f} ms  (first open on a fresh server; target < 1000 ms)"
    )
    print(
        f"  then                          {statistics.median(painted[1:]) * 1000:7.0f} ms  (median of {args.runs} more)"
    )
    print(
        f"server RSS after the heavy tour  peak {tour['peak']:6.1f} MB, idle {tour['idle']:6.1f} MB  (target ≤ 100 MB)"
    )


if __name__ == "__main__":
    main()
