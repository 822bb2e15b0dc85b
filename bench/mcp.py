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
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This file is named like the ``mcp`` package; run as a script its directory comes first on the path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from pydsh.kernel import AbortController, Kernel, create_scope  # noqa: E402
from pydsh.kernel.compose import Row  # noqa: E402
from pydsh.session.events import make_header  # noqa: E402
from pydsh.testing import mcp_server  # noqa: E402
from pydsh.tools.mcp import McpServer  # noqa: E402
from pydsh.tools.registry import ToolExec, ToolRegistry  # noqa: E402


class Agent:
    """Just enough of the Agent protocol for tool calls."""

    def __init__(self, session: Any) -> None:
        self.id = session.id
        self.session = session
        self.ctx: Any = None
        self.status = "running"

    def followup(self, message: Any) -> None: ...

    def inject(self, message: Any) -> None: ...

    def steer(self, message: Any) -> None: ...


class World:
    """A composed kernel with the MCP rows and one agent whose session has an open step."""

    def __init__(self, kernel: Kernel, agent: Agent) -> None:
        self.kernel = kernel
        self.agent = agent
        self.signal = AbortController().signal
        self.tools: ToolRegistry = kernel.ctx.require("tools")
        self.n = 0

    async def call(self, name: str, args: dict[str, Any]) -> str:
        self.n += 1
        raw = json.dumps(args)
        exec = ToolExec(
            f"c{self.n}", name, raw, json.loads(raw), self.agent, self.agent.session, 1, 1, self.signal, self.agent
        )  # type: ignore[arg-type]
        inv = self.tools.invocation(exec)
        await inv.prepare()
        await inv.execute()
        outcome = await inv.commit()
        return "".join(b["text"] for b in outcome.content if b["type"] == "text")

    def server(self, name: str) -> McpServer:
        return next(
            f.instance
            for f in self.kernel.ctx.fiber.children
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
    kernel = Kernel()
    await kernel.load([Row(id=f"{n}-{i}", name=n, config=c) for i, (n, c) in enumerate(rows)])
    session = kernel.ctx.require("sessions").new(make_header("bench", 1, cwd=str(cwd)))
    agent = Agent(session)
    agent.ctx = create_scope(kernel.ctx, agent).ctx
    session.scope = agent
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    return World(kernel, agent)


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
                session = w.server("s").session
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
