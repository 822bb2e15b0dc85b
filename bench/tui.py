"""``pydsh tui`` benchmark in a real pseudo-terminal: start → first paint, resuming a long session, and
keystroke-to-echo latency while a heavy turn streams.

Run: python bench/tui.py [--runs 5] [--events 10000] [--calls 1500]

1. start: spawns ``python -m pydsh tui`` on a pty (100×30, fresh ``DSH_HOME``, keyless scripted model) and
   times spawn → the prompt's placeholder written to the terminal (the first full frame), median of
   ``--runs`` after one warm-up; Textual's own import time is printed beside it.
2. resume: seeds a stored session of about ``--events`` events, then times ``pydsh tui --resume ID``
   spawn → its last answer on the terminal (target < 1 s; target of the issue), median of ``--runs``.
3. heavy turn: a prompt whose turn makes ``--calls`` tool calls (50 per step); while it streams, one
   keystroke every 100 ms, each a letter no tool card draws, and the time from writing the key to the pty
   until the letter comes back in the terminal output (target < 50 ms: p50, p95 and max printed).
4. long answer: the same keystrokes while an answer of ``--answer-kb`` KB of Markdown (headings,
   paragraphs, lists, code) streams in 40-character pieces, one every 2 ms.

The load average is printed: a busy machine stretches every wall time here.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.testing.hosts import ScriptedHost, scripted_patch  # noqa: E402
from tests.apps.web.browser.perf import markdown_answer, streamed_answer  # noqa: E402

PLACEHOLDER = b"sk anything"
"""The prompt's placeholder in the first full frame, without its first letter: the cursor sits on it, so
its colours split it from the rest until the cursor first blinks off (half a second later)."""
ECHO = "αβγδεζηθικλμνξπρστφχψωжзийклмнпфцчшщыэюя"
"""Letters typed during the heavy turn: none appears in a tool card, so each one's echo is unambiguous."""
WIDE = [
    {"id": "deepseek-official", "name": "scripted", "models": [{"id": "deepseek-v4-flash", "contextWindow": 10**9}]}
]


class Terminal:
    """``python -m pydsh ARGS`` on a pseudo-terminal of 100×30; the output read as it comes."""

    def __init__(self, args: list[str], home: Path, cwd: Path, patch: Path) -> None:
        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {
            **os.environ,
            "DSH_HOME": str(home),
            "TERM": "xterm-256color",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        }
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydsh", "tui", "--patch", str(patch), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.output = b""

    def read(self, timeout: float) -> bytes:
        """What arrives within ``timeout`` seconds (at least one read attempt)."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return b""
        try:
            chunk = os.read(self.master, 1 << 16)
        except OSError:
            return b""
        self.output += chunk
        return chunk

    def wait_for(self, needle: bytes, timeout: float = 60.0) -> float:
        """Seconds from spawn until ``needle`` was written to the terminal."""
        deadline = time.perf_counter() + timeout
        while needle not in self.output:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{needle!r} never came; last output: {self.output[-400:]!r}")
            self.read(0.05)
        return time.perf_counter() - self.began

    def write(self, data: bytes) -> None:
        os.write(self.master, data)

    def quit(self) -> None:
        """Ctrl+C twice (a running turn is stopped first), then wait for the exit; killed if it hangs."""
        try:
            for _ in range(2):
                self.write(b"\x03")
                time.sleep(0.3)
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self.master)


def installed_like() -> None:
    """Measure an installed package: compiled bytecode present and used (pip compiles at install; an
    editable checkout under ``PYTHONDONTWRITEBYTECODE`` would recompile every module per spawn)."""
    import compileall

    import pydsh

    compileall.compile_dir(str(Path(pydsh.__file__).parent), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def write_patch(folder: Path, script: list[Any]) -> Path:
    path = folder / "scripted.yml"
    path.write_text(yaml.safe_dump(scripted_patch(script, WIDE)))
    return path


def textual_import_ms() -> float:
    code = "import time; t = time.perf_counter(); import textual.app; print((time.perf_counter() - t) * 1000)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def first_paint(root: Path, runs: int) -> list[float]:
    """Spawn → the prompt painted, once to warm up and then ``runs`` times."""
    times = []
    for i in range(runs + 1):
        home, cwd = root / f"start-{i}", root / "work"
        cwd.mkdir(exist_ok=True)
        term = Terminal([], home, cwd, write_patch(root, [{"text": "hi"}]))
        try:
            took = term.wait_for(PLACEHOLDER)
        finally:
            term.quit()
        if i:
            times.append(took)
    return times


def glob_step(count: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "glob", "arguments": {"pattern": f"*{i}.md"}} for i in range(count)]}


async def seed(home: Path, cwd: Path, events: int) -> tuple[str, int]:
    """A stored session of at least ``events`` events: turns of four steps of 25 tool calls and an answer."""
    turn = [glob_step(25)] * 4 + [{"text": "turn done"}]
    turns = events // 150 + 5  # a turn logs ~240 events; unused script entries are never called
    async with ScriptedHost(turn * turns, profile="tui", cwd=cwd, dsh_home=home, providers=WIDE) as host:
        agent = await host.create_agent()
        n = 0
        while len(agent.events) < events - 10:
            n += 1
            await agent.run(f"turn {n}")
        await agent.run("the last prompt")
        return agent.session_id, len(agent.events)


def resume(root: Path, runs: int, events: int) -> tuple[int, list[float]]:
    home, cwd = root / "long", root / "work"
    cwd.mkdir(exist_ok=True)
    session_id, count = asyncio.run(seed(home, cwd, events))
    times = []
    for i in range(runs + 1):
        term = Terminal(["--resume", session_id], home, cwd, write_patch(root, [{"text": "hi"}]))
        try:
            took = term.wait_for(b"turn done")
        finally:
            term.quit()
        if i:
            times.append(took)
    return count, times


def heavy_turn(root: Path, calls: int) -> list[float]:
    """Keystroke → echo, in milliseconds, while a turn of ``calls`` tool calls streams."""
    steps = [glob_step(50)] * (calls // 50)
    home, cwd = root / "heavy", root / "work"
    cwd.mkdir(exist_ok=True)
    term = Terminal([], home, cwd, write_patch(root, [*steps, {"text": "heavy turn done"}]))
    try:
        return keystrokes(term, b"heavy turn done")
    finally:
        term.quit()


def long_answer(root: Path, kb: int) -> list[float]:
    """Keystroke → echo, in milliseconds, while an answer of ``kb`` KB of Markdown streams."""
    text = markdown_answer(kb * 1024) + "long answer done\n"
    home, cwd = root / "answer", root / "work"
    cwd.mkdir(exist_ok=True)
    path = root / "answer.yml"
    path.write_text(yaml.safe_dump(scripted_patch([streamed_answer(text, 40)], WIDE, pace_ms=2)))
    term = Terminal([], home, cwd, path)
    try:
        return keystrokes(term, b"long answer done")
    finally:
        term.quit()


def keystrokes(term: Terminal, done: bytes) -> list[float]:
    """Send the prompt, then one letter every 100 ms until ``done`` is drawn; each letter's echo time."""
    term.wait_for(PLACEHOLDER)
    term.write(b"go\r")
    term.wait_for(b"running")
    latencies = []
    for letter in ECHO:
        if done in term.output:
            break
        seen = len(term.output)
        began = time.perf_counter()
        term.write(letter.encode())
        needle = letter.encode()
        while needle not in term.output[seen:]:
            if time.perf_counter() - began > 5:
                raise TimeoutError(f"no echo of {letter!r}")
            term.read(0.005)
        latencies.append((time.perf_counter() - began) * 1000)
        time.sleep(0.1)
        term.read(0)
    return latencies


def spread(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = ordered[max(0, round(len(ordered) * 0.95) - 1)]
    return (
        f"{len(latencies)} keys, p50 {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms, "
        f"max {max(latencies):.1f} ms (target < 50 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--answer-kb", type=int, default=30)
    args = parser.parse_args()
    installed_like()
    print(f"load average: {os.getloadavg()}")
    print(f"textual import: {textual_import_ms():.0f} ms")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        starts = first_paint(root, args.runs)
        print(
            f"start → first paint: median {statistics.median(starts) * 1000:.0f} ms "
            f"(runs: {', '.join(f'{t * 1000:.0f}' for t in starts)}; target < 400 ms)"
        )
        print(f"keystroke → echo during a {args.calls}-tool-call turn: {spread(heavy_turn(root, args.calls))}")
        print(
            f"keystroke → echo while a {args.answer_kb} KB answer streams: {spread(long_answer(root, args.answer_kb))}"
        )
        count, resumes = resume(root, args.runs, args.events)
        print(
            f"resume a {count}-event session → last turn shown: median {statistics.median(resumes) * 1000:.0f} ms "
            f"(runs: {', '.join(f'{t * 1000:.0f}' for t in resumes)}; target < 1000 ms)"
        )


if __name__ == "__main__":
    main()
