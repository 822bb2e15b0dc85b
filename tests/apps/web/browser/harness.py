"""The browser-test harness of spec 12 §8.1: a `pydsh web` subprocess on a scripted model, Debian's Chromium
through Playwright, console-error capture and non-blank screenshot checks."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[4]
ARTIFACTS = REPO / "test-artifacts" / "web"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""libyaml's safe dumper when present: the pure-Python one takes seconds over a 5 MB scripted answer."""
MISSING_CHROMIUM = "Chromium not found: install it with `apt-get install chromium` (or set PYDSH_CHROMIUM)"
PROVIDERS = [
    {
        "id": "deepseek-official",
        "name": "DeepSeek",
        "retryPolicy": {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}},
        "models": [
            {"id": "deepseek-v4-flash", "contextWindow": 128000, "reasoningEfforts": ["high", "max"]},
            {"id": "deepseek-v4-pro", "contextWindow": 128000, "reasoningEfforts": ["high", "max"]},
        ],
    }
]


def chromium_path() -> str | None:
    """The distribution's Chromium (override with PYDSH_CHROMIUM)."""
    return os.environ.get("PYDSH_CHROMIUM") or shutil.which("chromium")


def replay_patch(scripts: list[Any], *, pace_ms: int = 0, extra: list[Any] = (), ops: list[Any] = ()) -> list[Any]:
    """Profile patch ops: the scripted adapter in place of the DeepSeek adapter, extra rows, then more ops."""
    config: dict[str, Any] = {"scripts": scripts, "providers": PROVIDERS}
    if pace_ms:
        config["paceMs"] = pace_ms
    return [
        {"id": "llm-deepseek", "disabled": True},
        {"insert": [{"id": "llm-replay", "name": "llm-replay", "config": config}, *extra]},
        *ops,
    ]


class WebServer:
    """`pydsh web --port 0 --no-open` as a subprocess in a temporary DSH_HOME and workspace."""

    def __init__(
        self,
        root: Path,
        scripts: list[Any],
        *,
        pace_ms: int = 0,
        extra: list[Any] = (),
        ops: list[Any] = (),
        args: list[str] = (),
        env: dict[str, str] | None = None,
    ):
        self.root = root
        self.home = root / "home"
        self.workspace = root / "work"
        self.home.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "hello.txt").write_text("hello world\nsecond line\n")
        patch = root / "patch.yml"
        ops_list = replay_patch(scripts, pace_ms=pace_ms, extra=list(extra), ops=list(ops))
        patch.write_text(yaml.dump(ops_list, Dumper=SAFE_DUMPER))
        extra_env = env
        env = {**os.environ, "PYTHONPATH": str(REPO), "DSH_HOME": str(self.home)}
        for key in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"):
            env.pop(key, None)
        env.update(extra_env or {})
        self.stderr_path = root / "server.stderr"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pydsh",
                "web",
                "--patch",
                str(patch),
                "--port",
                "0",
                "--no-open",
                "--cwd",
                str(self.workspace),
                *args,
            ],
            cwd=self.workspace,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("w"),
            text=True,
        )
        self.url = self._first_line()
        self.origin = self.url.split("/?", 1)[0]
        self.token = self.url.split("token=", 1)[1]
        self.cookie: tuple[str, str] | None = None
        """The auth cookie ``(name, value)`` once someone spent the single-use token."""

    def _first_line(self) -> str:
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=60):
            self.proc.kill()
            raise AssertionError(f"pydsh web printed no URL in 60 s: {self.stderr()}")
        line = self.proc.stdout.readline().strip()
        assert line.startswith("pydsh web: http://"), f"unexpected first line {line!r}: {self.stderr()}"
        return line.removeprefix("pydsh web: ")

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def sign_in(self) -> tuple[str, str]:
        """The auth cookie, spending the single-use token on the first call unless a browser did."""
        if self.cookie is None:
            with httpx.Client(base_url=self.origin, timeout=30) as client:
                assert client.get(f"/?token={self.token}").status_code == 303
                [(name, value)] = client.cookies.items()
                self.cookie = (name, value)
        return self.cookie

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.Client]:
        """An httpx client holding the auth cookie."""
        name, value = self.sign_in()
        with httpx.Client(base_url=self.origin, timeout=30, cookies={name: value}) as client:
            yield client

    def session_ids(self) -> list[str]:
        with self.client() as c:
            return [s["sessionId"] for s in c.get("/api/sessions").json()["sessions"]]

    def log(self, session_id: str) -> list[dict[str, Any]]:
        """The stored log of a session (header first), through the API."""
        with self.client() as c:
            text = c.get(f"/api/sessions/{session_id}/log").text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def events(self, session_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.log(session_id)[1:] if kind is None or e["type"] == kind]

    def stop(self) -> int:
        """SIGTERM; the server must exit 0 within 5 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("pydsh web did not exit within 5 s of SIGTERM") from None
        return self.proc.returncode


def wait_for(predicate: Any, timeout: float = 20.0, message: str = "condition") -> Any:
    """Poll until `predicate()` is truthy (a functional wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.05)


def unfold(page: Any, nth: int = 0) -> None:
    """Open the `nth` finished turn's work details; clicks again if the page scrolled the toggle away mid-click,
    then waits two frames: a chunk of cards (content-visibility: auto) has no rendered text before the first
    frame decides it is on screen."""
    toggle = page.locator(".work-toggle").nth(nth)

    def opened() -> bool:
        if toggle.get_attribute("aria-expanded") == "true":
            return True
        toggle.click()
        return toggle.get_attribute("aria-expanded") == "true"

    wait_for(opened, message="the work details open")
    page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG into rows of pixel bytes (enough for Chromium's screenshots)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, _depth, color = struct.unpack(">IIBB", body[:10])
            channels = {2: 3, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, channels, rows


def differing_share(data: bytes) -> float:
    """Share of pixels (sampled) that differ from the most common colour, the background."""
    width, channels, rows = png_pixels(data)
    counts: dict[bytes, int] = {}
    samples: list[bytes] = []
    for row in rows[::4]:
        for x in range(0, width, 4):
            px = row[x * channels : x * channels + 3]
            samples.append(px)
            counts[px] = counts.get(px, 0) + 1
    background = max(counts, key=lambda k: counts[k])
    return sum(1 for px in samples if px != background) / len(samples)


def screenshot(page: Any, name: str) -> Path:
    """Save `test-artifacts/web/<name>.png` and assert it is not blank (≥ 2 % of pixels off background)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    data = page.screenshot(path=str(path))
    share = differing_share(data)
    assert share >= 0.02, f"screenshot {name} looks blank ({share:.1%} of pixels differ from the background)"
    return path
