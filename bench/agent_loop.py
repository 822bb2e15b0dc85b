"""Agent-loop benchmark: harness time of a 10-step read task, and process start to first model request.

Run: python bench/agent_loop.py
1. In process, with an instant scripted model: a prompt whose model calls ``read`` nine times and
   then answers (10 steps). Everything but the model runs for real: prompt assembly, request
   records, tools, the log with its checkpoint flushes (fsync) to disk.
2. As a subprocess: ``pydsh headless`` against the loopback mock model server; the time from
   spawning the process to the server receiving the first request.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.contract.agent import user_message  # noqa: E402
from pydsh.testing.mock_model_server import MockModelServer  # noqa: E402
from tests.agent.harness import start_host  # noqa: E402

READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}


async def in_process(runs: int) -> list[float]:
    workspace = Path(tempfile.mkdtemp(prefix="pydsh-bench-ws-"))
    (workspace / "a.txt").write_text("".join(f"line {i}\n" for i in range(200)))
    timings = []
    for _ in range(runs):
        host = await start_host([READ] * 9 + [{"text": "done"}])
        handle = await host.create(workspace)
        agent = handle.agent
        started = time.perf_counter()
        agent.followup(user_message("read a.txt nine times"))
        await agent.when_idle()
        timings.append(time.perf_counter() - started)
        assert agent.session.events[-1]["data"]["reason"] == {"kind": "completed"}
        await host.close()
    return timings


async def first_request(runs: int) -> list[float]:
    timings = []
    for _ in range(runs):
        async with MockModelServer(sequence=["success"]) as server:
            home = tempfile.mkdtemp(prefix="pydsh-bench-home-")
            env = {**os.environ, "DSH_HOME": home, "DEEPSEEK_BASE_URL": server.base_url, "DEEPSEEK_API_KEY": "sk-bench"}
            started = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "pydsh", "headless", "hi", "--cwd", home],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            while not server.requests:
                await asyncio.sleep(0.001)
            timings.append(time.perf_counter() - started)
            await asyncio.get_running_loop().run_in_executor(None, proc.wait)
    return timings


def report(label: str, values: list[float], note: str = "") -> None:
    ms = sorted(v * 1000 for v in values)
    print(f"{label}: median {statistics.median(ms):.1f} ms, min {ms[0]:.1f} ms, max {ms[-1]:.1f} ms {note}".rstrip())


def installed_like() -> None:
    """Measure an installed package: compiled bytecode present and used (as after ``pip install``)."""
    import compileall

    compileall.compile_dir(str(REPO / "pydsh"), quiet=1)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


async def main() -> None:
    installed_like()
    os.environ.setdefault("DSH_HOME", tempfile.mkdtemp(prefix="pydsh-bench-home-"))
    loop_times = await in_process(7)
    report(
        "10-step read task, harness time (instant scripted model, fsync checkpoints)", loop_times, "(target < 150 ms)"
    )
    print(f"  per step: {statistics.median(loop_times) * 100:.1f} ms")
    report("process start to first model request (pydsh headless, mock server)", await first_request(5))


if __name__ == "__main__":
    asyncio.run(main())
