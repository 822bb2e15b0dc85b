"""SDK server benchmark: spawn → ``initialize`` latency, RSS after ``initialize``, a 10-step tool prompt.

Run: python bench/sdk.py [--runs 7]
Spawns ``pydsh --profile sdk`` (the installed console script) with a fresh ``DSH_HOME`` per run and
prints medians: the time from spawn to the ``initialize`` response, the resident set size right
after it, and the time from ``shutdown`` to process exit. Then it times one prompt whose model
(the loopback mock) calls ``read`` nine times before answering — ten steps — from the
``session/prompt`` request to the root's ``idle`` notification, through our client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer

PYDSH = str(Path(sys.executable).parent / "pydsh")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_start(workspace: str) -> tuple[float, float, float]:
    """(spawn → initialize response s, RSS MB after initialize, shutdown → exit s) of one process."""
    env = {**os.environ, "DSH_HOME": tempfile.mkdtemp(prefix="bench-sdk-home-")}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"cwd": workspace, "provider": "deepseek-official", "model": "deepseek-v4-flash"},
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        [PYDSH, "--profile", "sdk"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    ready = time.perf_counter() - started
    rss = rss_mb(proc.pid)
    stopping = time.perf_counter()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}\n')
    proc.stdin.flush()
    proc.wait()
    return ready, rss, time.perf_counter() - stopping


async def ten_step_prompt(workspace: Path) -> float:
    """Wall time of one 10-step ``read`` task, prompt request to root idle."""
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    read = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}
    sequence = [read] * 9 + [{"text": "Read it ten times."}]
    async with MockModelServer(sequence=sequence, chunkDelayMs=0) as server:
        home = tempfile.mkdtemp(prefix="bench-sdk-home-")
        async with AsyncHarness(cwd=workspace, dsh_home=home, base_url=server.base_url, api_key="sk-bench") as h:
            started = time.perf_counter()
            result = await h.run("Read a.txt ten times.", session_id="bench")
            elapsed = time.perf_counter() - started
    steps = sum(1 for e in result.events if e["type"] == "step/start")
    if steps != 10 or result.finish_reason != "completed":
        raise SystemExit(f"unexpected run: {steps} steps, finish {result.finish_reason}")
    return elapsed


def installed_like() -> None:
    """Measure an installed package: compiled bytecode present and used (pip compiles at install;
    an editable checkout under ``PYTHONDONTWRITEBYTECODE`` would recompile every module per spawn)."""
    import compileall

    import pydsh

    compileall.compile_dir(str(Path(pydsh.__file__).parent), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    installed_like()
    with tempfile.TemporaryDirectory(prefix="bench-sdk-ws-") as workspace:
        one_start(workspace)
        samples = [one_start(workspace) for _ in range(args.runs)]
        ready = statistics.median(s[0] for s in samples)
        rss = statistics.median(s[1] for s in samples)
        exit_after = statistics.median(s[2] for s in samples)
        print(f"spawn -> initialize response: {ready * 1000:.0f} ms median of {args.runs} (target <= 250 ms)")
        print(f"RSS after initialize:         {rss:.1f} MB median (target <= 70 MB)")
        print(f"shutdown -> exit:             {exit_after * 1000:.0f} ms median (bound 1000 ms)")
        wall = asyncio.run(ten_step_prompt(Path(workspace)))
        print(f"10-step read task:            {wall * 1000:.0f} ms prompt -> idle (loopback mock, no chunk delay)")


if __name__ == "__main__":
    main()
