"""MCP benchmark: per-call cost of an MCP tool (stdio and streamable HTTP) against a built-in tool.

Run: python bench/mcp.py [--calls 500]
Every call goes through the real registry and pipeline. The test server of pydsh.testing.mcp_server
answers ``echo``; the built-in reference is ``read`` of a 10-line file and ``todo_write``. The row
"session.call_tool" is the ``mcp`` library's own round trip on the same connection, so the
difference to the pipeline row is what pydsh adds (validation, projection, events).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools import OPEN_STEP, World, open_world

# This file is named like the ``mcp`` package; run as a script its directory comes first on the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pydsh.kernel.compose import Row  # noqa: E402
from pydsh.testing import mcp_server  # noqa: E402
from pydsh.tools.mcp import McpServer  # noqa: E402


def server(world: World, name: str) -> McpServer:
    """The fiber instance of the ``mcp-client`` row serving ``name``."""
    return next(
        f.instance
        for f in world.kernel.ctx.fiber.children
        if isinstance(f.instance, McpServer) and f.instance.server_name == name
    )


async def world(cwd: Path, http_url: str) -> World:
    rows = [
        ("session", None),
        ("system-prompt", None),
        ("working-directory", None),
        ("tools", None),
        ("tool-fs", None),
        ("tool-todo", None),
        (
            "mcp-client",
            {"transport": "stdio", "serverName": "s", "command": sys.executable, "args": [mcp_server.__file__]},
        ),
        ("mcp-client", {"transport": "streamable-http", "serverName": "h", "url": http_url}),
    ]
    return await open_world([Row(id=f"{n}-{i}", name=n, config=c) for i, (n, c) in enumerate(rows)], cwd, OPEN_STEP)


def per_call(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e6:9.1f} µs  min {min(samples) * 1e6:9.1f} µs  (n={len(samples)})"


async def interleaved(rows: list[tuple[str, Any]], n: int) -> dict[str, list[float]]:
    """Time every row ``n`` times in rotation, so a busy machine slows all rows alike."""
    for _ in range(min(50, n)):
        for _, call in rows:
            await call()
    samples: dict[str, list[float]] = {label: [] for label, _ in rows}
    for _ in range(n):
        for label, call in rows:
            start = time.perf_counter()
            await call()
            samples[label].append(time.perf_counter() - start)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    opts = parser.parse_args()
    http = subprocess.Popen([sys.executable, mcp_server.__file__, "--http"], stdout=subprocess.PIPE, text=True)
    try:
        assert http.stdout is not None
        url = f"http://127.0.0.1:{int(http.stdout.readline().split()[1])}/mcp"
        with tempfile.TemporaryDirectory(prefix="pydsh-bench-mcp-") as tmp:
            root = Path(tmp)
            (root / "a.txt").write_text("".join(f"line {i}\n" for i in range(10)))
            w = await world(root, url)
            try:
                todos = {"todos": [{"content": "bench", "status": "pending"}]}
                session = server(w, "s").session
                assert session is not None
                rows = [
                    ("built-in read (10 lines)", lambda: w.call("read", {"file_path": "a.txt"})),
                    ("built-in todo_write", lambda: w.call("todo_write", todos)),
                    ("mcp stdio echo", lambda: w.call("mcp__s__echo", {"text": "hi"})),
                    ("  session.call_tool direct", lambda: session.call_tool("echo", {"text": "hi"})),
                    ("mcp streamable-http echo", lambda: w.call("mcp__h__echo", {"text": "hi"})),
                ]
                for label, samples in (await interleaved(rows, opts.calls)).items():
                    print(f"{label:30}{per_call(samples)}")
            finally:
                await w.kernel.dispose()
    finally:
        http.terminate()
        http.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
