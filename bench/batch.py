"""Batch benchmark: 50 scripted tasks through the local pool and through Ray, the SDK server's CPU per
step as a session grows, 100 concurrent sessions in one SDK process beside the reference runtime, and
the server's responsiveness while 500 sessions run.

Run: python bench/batch.py [--tasks 50] [--workers 2] [--no-ray] [--step-cpu 50,200] [--sessions 100]
     [--busy-sessions 500] [--reference [EXE]]
Each task reads a file nine times and answers (10 steps) against the loopback mock model. Printed per
backend: tasks/s, harness CPU per step (the worker's own CPU time while it ran the task, over its
steps), the peak RSS of a worker. ``--step-cpu`` runs one session of read steps in one ``pydsh
--profile sdk`` process and prints the median server CPU of one step around each given step count, and
the same figure for the libraries alone doing a step's unavoidable work (``bench/step_floor.py``).
Then ``--sessions`` sessions of the same 10-step task are prompted at once in one SDK process: wall
time, the server's CPU time and peak RSS. Both run in the reference runtime too with ``--reference``
(EXE defaults to ``$PYDSH_REFERENCE_DSH``). Last, ``--busy-sessions`` 10-step sessions run at once
while a probe times requests answered in process: ``session/working-directory/get`` of a live session
and ``session/status`` (not a method of wire 0.2: answered with its error, through the same queue); once
per ``--busy-model-s`` value, the time each model call takes (0: the server is saturated, and a request
waits behind whatever the event loop has queued). There the mock model runs in a process of its own and
the bench's own collector is off, so the figures are the server's.
Zero skips a part (``--tasks 0`` skips the batch backends).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.sdk import cpu_s  # noqa: E402
from bench.step_floor import READ, WINDOW, floor, report  # noqa: E402
from pydsh.batch.local import LocalBackend  # noqa: E402
from pydsh.batch.progress import PlainDisplay  # noqa: E402
from pydsh.batch.runner import Backend, Batch, Options  # noqa: E402
from pydsh.sdk.client import AsyncHarness, JsonRpcError  # noqa: E402
from pydsh.session.events import collector_paused  # noqa: E402
from pydsh.testing.mock_model_server import MockModelServer  # noqa: E402

STEPS = 10


def read_steps(steps: int) -> Any:
    """A model that reads ``steps - 1`` times, then answers, whatever session asks (its history says how far it is)."""

    def choose(body: dict[str, Any]) -> Any:
        done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        return READ if done < steps - 1 else {"text": "Read it."}

    return choose


ten_steps = read_steps(STEPS)


def task_file(directory: Path, count: int) -> Path:
    source = directory / "project"
    source.mkdir()
    (source / "a.txt").write_text("alpha\nbeta\n")
    tasks = [{"id": f"b{i:03d}", "prompt": "Read a.txt ten times.", "workspace": "project"} for i in range(count)]
    path = directory / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


async def one_backend(label: str, count: int, workers: int, make: Any) -> None:
    """Run the batch on one backend and print its figures."""
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-batch-") as tmp:
        directory = Path(tmp)
        tasks = task_file(directory, count)
        out = directory / "out"
        backend: Backend = make(out)
        started = time.perf_counter()
        try:
            records = await Batch(tasks, Options(out=out, workers=workers), backend, PlainDisplay(io.StringIO())).run()
        finally:
            await backend.close()
        wall = time.perf_counter() - started
    bad = [r for r in records if r.get("status") != "completed"]
    if bad:
        raise SystemExit(f"{label}: {len(bad)} tasks did not complete: {bad[0]}")
    per_step = [r["cpuS"] / STEPS * 1000 for r in records]
    print(
        f"{label:<6} {count} tasks x {STEPS} steps, {workers} workers: {count / wall:.1f} tasks/s ({wall:.1f} s); "
        f"harness CPU per step {statistics.median(per_step):.1f} ms median (task setup, host and check included); "
        f"peak RSS per worker {max(r['peakRssMB'] for r in records):.0f} MB"
    )


def ray_backend(out: Path) -> Backend:
    from pydsh.batch.ray_backend import RayBackend

    return RayBackend("auto", out)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def concurrent_sessions(label: str, sessions: int, dsh_bin: str | None) -> None:
    """``sessions`` 10-step prompts at once in one SDK process: wall, server CPU, peak RSS."""
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-sessions-") as tmp:
        workspace = workspace_in(tmp)
        async with MockModelServer(choose=ten_steps, chunkDelayMs=0) as server:
            options: dict[str, Any] = {"cwd": workspace, "dsh_home": Path(tmp) / "home", "base_url": server.base_url}
            if dsh_bin is not None:
                options["dsh_bin"] = dsh_bin
            async with AsyncHarness(api_key="sk-bench", request_timeout=600, **options) as harness:
                proc = harness.client.proc
                assert proc is not None
                cpu_before = cpu_s(proc.pid)
                started = time.perf_counter()
                results = await asyncio.gather(*(harness.run("Read a.txt ten times.") for _ in range(sessions)))
                wall = time.perf_counter() - started
                cpu = cpu_s(proc.pid) - cpu_before
                rss = peak_rss_mb(proc.pid)
    steps = sum(1 for r in results for e in r.events if e["type"] == "step/start")
    print(
        f"{label:<9} {sessions} sessions x {STEPS} read steps at once: {wall:.1f} s wall, {cpu:.1f} s CPU "
        f"({cpu / max(steps, 1) * 1000:.1f} ms per step), peak RSS {rss:.0f} MB"
    )


def workspace_in(tmp: str) -> Path:
    workspace = Path(tmp) / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    return workspace


async def step_cpu(label: str, at: list[int], dsh_bin: str) -> list[float]:
    """One session of read steps; the server's CPU between consecutive ``step/start`` events, median around each count."""
    steps = max(at) + WINDOW
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-steps-") as tmp:
        workspace = workspace_in(tmp)
        async with MockModelServer(choose=read_steps(steps), chunkDelayMs=0) as server:
            options: dict[str, Any] = {"cwd": workspace, "dsh_home": Path(tmp) / "home", "base_url": server.base_url}
            async with AsyncHarness(api_key="sk-bench", request_timeout=600, dsh_bin=dsh_bin, **options) as harness:
                proc = harness.client.proc
                assert proc is not None
                marks: list[float] = []

                def mark(event: dict[str, Any]) -> None:
                    if event["type"] == "step/start":
                        marks.append(cpu_s(proc.pid))

                await harness.session().run("Read a.txt again and again.", on_event=mark)
    cost = [(b - a) * 1000 for a, b in itertools.pairwise(marks)]
    medians = [statistics.median(cost[n - WINDOW : n + WINDOW]) for n in at]
    figures = ", ".join(f"{m:.1f} ms at {n}" for n, m in zip(at, medians, strict=True))
    print(f"{label:<9} harness CPU per read step (median of steps n-{WINDOW}..n+{WINDOW - 1}): {figures}")
    return medians


@contextlib.asynccontextmanager
async def model_process(model_s: float) -> AsyncIterator[str]:
    """The 10-step mock model in a process of its own (its base URL): serving 500 sessions' model calls on the
    probe's event loop would time the bench process, not the server."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    process = spawn.Process(target=serve_model, args=(theirs, model_s), daemon=True)
    process.start()
    try:
        port = await asyncio.to_thread(ours.recv)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await asyncio.to_thread(process.join)


def serve_model(conn: Connection, model_s: float) -> None:
    """In the model process: serve :data:`ten_steps`, each call held ``model_s``, until terminated."""

    async def thinking(body: dict[str, Any]) -> None:
        await asyncio.sleep(model_s)

    async def serve() -> None:
        async with MockModelServer(choose=ten_steps, chunkDelayMs=0, hold=thinking if model_s else None) as server:
            conn.send(server.port)
            await asyncio.Event().wait()

    asyncio.run(serve())


async def busy_probe(sessions: int, dsh_bin: str, model_s: float) -> None:
    """``sessions`` 10-step prompts at once, each model call taking ``model_s``; meanwhile the latency of two
    requests answered in process. Like ``timeit``, the bench turns its own cyclic collector off meanwhile: the
    RunResults of 500 sessions make its full collections last a few hundred ms, and a probe answer waiting in
    the pipe through one of those would be the bench's pause, not the server's."""
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-busy-") as tmp, collector_paused():
        workspace = workspace_in(tmp)
        async with model_process(model_s) as base_url:
            options: dict[str, Any] = {"cwd": workspace, "dsh_home": Path(tmp) / "home", "base_url": base_url}
            async with AsyncHarness(api_key="sk-bench", request_timeout=600, dsh_bin=dsh_bin, **options) as harness:
                probe = harness.session()
                await probe.run("Read a.txt ten times.")
                run = asyncio.gather(*(harness.run("Read a.txt ten times.") for _ in range(sessions)))
                cwd_ms, status_ms = [], []
                proc = harness.client.proc
                assert proc is not None
                begun, cpu_before = time.perf_counter(), cpu_s(proc.pid)
                while not run.done():
                    await asyncio.sleep(0.1)
                    started = time.perf_counter()
                    await probe.get_working_directory()
                    cwd_ms.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    with contextlib.suppress(JsonRpcError):
                        await harness.client.request("session/status", {"sessionId": probe.id})
                    status_ms.append((time.perf_counter() - started) * 1000)
                await run
                wall, cpu = time.perf_counter() - begun, cpu_s(proc.pid) - cpu_before
    print(
        f"{sessions} sessions x {STEPS} read steps, model calls of {model_s:g} s: {wall:.1f} s wall, "
        f"server CPU {cpu:.1f} s ({cpu / wall * 100:.0f}% of a core, {cpu / sessions / STEPS * 1000:.1f} ms per step)"
    )
    for name, values in (("session/working-directory/get", cwd_ms), ("session/status (error reply)", status_ms)):
        ordered = sorted(values)
        print(
            f"  {name:<29} median {statistics.median(ordered):.1f} ms, "
            f"p95 {ordered[int(len(ordered) * 0.95)]:.1f} ms, max {ordered[-1]:.1f} ms ({len(ordered)} probes)"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--step-cpu", default="50,200", help="step counts to report CPU at ('' skips)")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--busy-sessions", type=int, default=500)
    parser.add_argument(
        "--busy-model-s", default="0,5", help="seconds each model call takes in the busy runs, one run per value"
    )
    parser.add_argument("--reference", nargs="?", const=os.environ.get("PYDSH_REFERENCE_DSH", ""), default=None)
    args = parser.parse_args()
    if args.reference == "":
        raise SystemExit("--reference needs the reference executable (or PYDSH_REFERENCE_DSH)")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.tasks:
        await backends(args)
    pydsh = str(Path(sys.executable).parent / "pydsh")
    if args.step_cpu:
        at = [int(n) for n in args.step_cpu.split(",")]
        ours = await step_cpu("pydsh", at, pydsh)
        least = await floor(at)
        print(report(at, least))
        if args.reference:
            theirs = await step_cpu("reference", at, args.reference)
            ratios = ", ".join(
                f"pydsh {a / r:.2f}x, floor {b / r:.2f}x at {n}"
                for n, a, b, r in zip(at, ours, least, theirs, strict=True)
            )
            print(f"{'ratio':<9} CPU per read step against the reference's: {ratios}")
    if args.sessions:
        await concurrent_sessions("pydsh", args.sessions, pydsh)
        if args.reference:
            await concurrent_sessions("reference", args.sessions, args.reference)
    if args.busy_sessions:
        for model_s in args.busy_model_s.split(","):
            await busy_probe(args.busy_sessions, pydsh, float(model_s))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


async def backends(args: argparse.Namespace) -> None:
    """The batch on the local pool, then on Ray when it is installed."""
    async with MockModelServer(choose=ten_steps, chunkDelayMs=0) as server:
        os.environ |= {"DEEPSEEK_BASE_URL": server.base_url, "DEEPSEEK_API_KEY": "sk-bench"}
        await one_backend("local", args.tasks, args.workers, LocalBackend)
        if not args.no_ray:
            try:
                import ray
            except ImportError:
                print("ray    not installed (pip install 'pydsh[ray]'); skipped")
            else:
                ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
                try:
                    await one_backend("ray", args.tasks, args.workers, ray_backend)
                finally:
                    ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
