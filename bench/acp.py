"""ACP bridge benchmark: spawn → first ``agent_message_chunk`` on the scripted model.

Run: python bench/acp.py [--runs 7]
Each run spawns ``python -m pydsh acp`` with a fresh ``DSH_HOME`` and a patch that serves the
default route from a one-answer script, then drives it with the ACP library's own client:
``initialize`` → ``session/new`` → ``session/prompt``. Prints medians of the time from spawn to
the ``initialize`` answer, to the ``session/new`` answer, and to the first ``agent_message_chunk``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
# Run as a script, this file's directory comes first on sys.path and its name would shadow the
# ACP library's package: drop that entry before importing it.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
import acp  # noqa: E402


class FirstChunk:
    """An editor that only notes when the first assistant text arrives."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if update.session_update == "agent_message_chunk":
            self.arrived.set()


async def one_run(work: Path) -> tuple[float, float, float]:
    """(spawn → initialize, spawn → session/new, spawn → first agent_message_chunk) in seconds."""
    patch = work / "patch.yml"
    row = {"id": "llm-replay", "name": "llm-replay", "config": {"scripts": [{"text": "Hello from pydsh."}]}}
    patch.write_text(yaml.safe_dump([{"insert": [row]}]))
    env = {**os.environ, "DSH_HOME": tempfile.mkdtemp(prefix="bench-acp-home-"), "PYTHONPATH": str(REPO)}
    client = FirstChunk()
    started = time.perf_counter()
    command = (sys.executable, "-m", "pydsh", "acp", "--patch", str(patch))
    async with acp.spawn_agent_process(client, *command, env=env, cwd=work, transport_kwargs={"stderr": None}) as (
        conn,
        _proc,
    ):
        await conn.initialize(protocol_version=1)
        ready = time.perf_counter() - started
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        opened = time.perf_counter() - started
        prompt = asyncio.ensure_future(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")]))
        await client.arrived.wait()
        first = time.perf_counter() - started
        await prompt
    return ready, opened, first


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    samples = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-acp-") as work:
            samples.append(await one_run(Path(work)))
    labels = ("spawn → initialize", "spawn → session/new", "spawn → first agent_message_chunk")
    for label, values in zip(labels, zip(*samples, strict=True), strict=True):
        median, low = statistics.median(values) * 1000, min(values) * 1000
        print(f"{label:36} median {median:7.1f} ms  (min {low:.1f}, n={runs})")


if __name__ == "__main__":
    asyncio.run(main())
