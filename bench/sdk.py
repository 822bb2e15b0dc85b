"""SDK server benchmark: spawn → ``initialize`` latency and its budget, RSS, a 10-step tool prompt.

Run: python bench/sdk.py [--runs 7] [--reference [EXE]]
Spawns ``pydsh --profile sdk`` (the installed console script) with a fresh ``DSH_HOME`` per run and
prints medians: the time from spawn to the ``initialize`` response, the resident set size right
after it, and the time from ``shutdown`` to process exit. The start-up budget splits the same path
(run by a driver that mirrors the launcher) into interpreter start, imports, composition, plugin
imports, plugin activation and the first response, and counts the modules imported. ``--reference`` times the
reference runtime's spawn → ``initialize`` interleaved with ours (EXE defaults to
``$PYDSH_REFERENCE_DSH``). Then it times one prompt whose model (the loopback mock) calls ``read``
nine times before answering — ten steps — from the ``session/prompt`` request to the root's
``idle`` notification, through our client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer

PYDSH = str(Path(sys.executable).parent / "pydsh")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


PHASES = ("interpreter", "imports", "composition", "plugin imports", "activation", "first response")
DRIVER = """
import os, sys, time
marks = [time.perf_counter()]
import asyncio
from pydsh.host import Host
from pydsh.host.keys import APP
from pydsh.host.launch import configure_logging
from pydsh.kernel.compose import resolve_rows, walk
from pydsh.kernel.plugin import GROUP_ALIASES, plugin_ref, resolve_plugin
from pydsh.kernel.profiles import compose_profile
marks.append(time.perf_counter())
rows = resolve_rows(compose_profile("sdk", []).rows)
marks.append(time.perf_counter())
for _holder, row in walk(rows):
    if not row.disabled and row.name not in GROUP_ALIASES and plugin_ref(row.name) is not None:
        resolve_plugin(row.name)
marks.append(time.perf_counter())
configure_logging()

async def serve():
    host = await Host.of_rows("sdk", rows).start(service=APP)
    marks.append(time.perf_counter())
    os.write(2, ("bench-marks " + " ".join(map(repr, marks)) + " %d\\n" % len(sys.modules)).encode())
    try:
        return await host.ctx.get(APP).run(host, [])
    finally:
        await host.close()

sys.exit(asyncio.run(serve()))
"""


def cpu_s(pid: int) -> float:
    """CPU time all threads of ``pid`` ran so far (steadier than wall time on a loaded machine)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


class Start(NamedTuple):
    """One process start: wall and CPU time to the ``initialize`` response, RSS, exit time, driver phases."""

    ready: float
    cpu: float
    rss: float
    exit: float
    phases: list[float]
    modules: int


def one_start(workspace: str, argv: list[str] | None = None) -> Start:
    """Spawn one process, ``initialize`` it, shut it down; phases and module count only from the driver (``argv`` None)."""
    env = {**os.environ, "DSH_HOME": tempfile.mkdtemp(prefix="bench-sdk-home-")}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"cwd": workspace, "provider": "deepseek-official", "model": "deepseek-v4-flash"},
    }
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv or [sys.executable, "-c", DRIVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if argv is None else subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    ready = time.perf_counter() - started
    cpu = cpu_s(proc.pid)
    rss = rss_mb(proc.pid)
    stopping = time.perf_counter()
    proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"shutdown"}\n')
    proc.stdin.flush()
    proc.wait()
    exited = time.perf_counter() - stopping
    if argv is not None:
        return Start(ready, cpu, rss, exited, [], 0)
    assert proc.stderr is not None
    line = next(x for x in proc.stderr.read().splitlines() if x.startswith(b"bench-marks "))
    *raw, modules = line.split()[1:]
    marks = [started, *map(float, raw), started + ready]
    return Start(ready, cpu, rss, exited, [b - a for a, b in itertools.pairwise(marks)], int(modules))


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


def budget(workspace: str, runs: int) -> None:
    """Print the median time of each start-up phase, measured by the driver."""
    samples = [one_start(workspace) for _ in range(runs)]
    phases = [statistics.median(s.phases[i] for s in samples) * 1000 for i in range(len(PHASES))]
    print(f"start-up budget (driver, median of {runs}, {samples[-1].modules} modules loaded):")
    for name, ms in zip(PHASES, phases, strict=True):
        print(f"  {name + ':':16} {ms:6.0f} ms")
    print(f"  {'total:':16} {statistics.median(s.ready for s in samples) * 1000:6.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--reference", nargs="?", const=os.environ.get("PYDSH_REFERENCE_DSH", ""), default=None)
    args = parser.parse_args()
    if args.reference == "":
        raise SystemExit("--reference needs the reference executable (or PYDSH_REFERENCE_DSH)")
    installed_like()
    with tempfile.TemporaryDirectory(prefix="bench-sdk-ws-") as workspace:
        ours_argv = [PYDSH, "--profile", "sdk"]
        one_start(workspace, ours_argv)
        samples, reference = [], []
        for _ in range(args.runs):
            samples.append(one_start(workspace, ours_argv))
            if args.reference:
                reference.append(one_start(workspace, [args.reference, "--profile", "sdk"]))
        ready = statistics.median(s.ready for s in samples)
        cpu = statistics.median(s.cpu for s in samples)
        rss = statistics.median(s.rss for s in samples)
        exit_after = statistics.median(s.exit for s in samples)
        print(f"spawn -> initialize response: {ready * 1000:.0f} ms median of {args.runs} (target <= 200 ms)")
        print(f"CPU time to initialize:       {cpu * 1000:.0f} ms median (what an idle machine would wait)")
        if reference:
            theirs = statistics.median(s.ready for s in reference)
            their_cpu = statistics.median(s.cpu for s in reference)
            print(
                f"reference spawn -> initialize: {theirs * 1000:.0f} ms median, interleaved "
                f"(ratio {ready / theirs:.2f}, target <= 0.15); CPU {their_cpu * 1000:.0f} ms "
                f"(ratio {cpu / their_cpu:.2f})"
            )
        budget(workspace, args.runs)
        print(f"RSS after initialize:         {rss:.1f} MB median (target <= 70 MB)")
        print(f"shutdown -> exit:             {exit_after * 1000:.0f} ms median (bound 1000 ms)")
        wall = asyncio.run(ten_step_prompt(Path(workspace)))
        print(f"10-step read task:            {wall * 1000:.0f} ms prompt -> idle (loopback mock, no chunk delay)")


if __name__ == "__main__":
    main()
