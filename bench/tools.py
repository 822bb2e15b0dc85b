"""Tool pipeline benchmark: per-call cost of read, grep over a 10,000-file tree and bash echo.

Run: python bench/tools.py [--reads 2000] [--files 10000] [--greps 5] [--bash 40]
Every call goes through the real registry and pipeline (pre-execute, validation, body,
post-execute with the spill and repeat-reminder policies) with the shipped policy stack loaded.
grep and glob are timed with ripgrep (when on PATH) and with the pure-Python fallback; bash echo
unconfined (danger-full-access) and under bubblewrap (workspace-write, when usable).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pydsh.contract.tools import TOOLS, ToolExec
from pydsh.kernel import AbortController, Kernel, create_scope
from pydsh.kernel.compose import Row
from pydsh.policy.sandbox import Bwrap
from pydsh.session.events import make_header
from pydsh.session.keys import SESSIONS
from pydsh.tools.registry import ToolRegistry

ROWS = [
    ("session", None),
    ("system-prompt", None),
    ("working-directory", None),
    ("tools", None),
    ("tool-fs", None),
    ("tool-fs-search", None),
    ("tool-bash", None),
    ("jobs", None),
    ("tool-jobs", None),
    ("fs-observation-policy", None),
    ("spill-policy", {"maxInlineTokens": 12500}),
    ("repeat-tool-reminder", {"thresholds": [3, 5, 8]}),
    ("sandbox-policy", None),
    ("approval", None),
]


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
    """A composed kernel with one agent whose session has an open step."""

    def __init__(self, kernel: Kernel, agent: Agent) -> None:
        self.kernel = kernel
        self.agent = agent
        self.signal = AbortController().signal
        self.tools: ToolRegistry = kernel.ctx.require(TOOLS)
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


OPEN_STEP = [("turn/start", {"turn": 1}), ("step/start", {"turn": 1, "step": 1})]


async def open_world(rows: list[Row], cwd: Path, events: list[tuple[str, dict[str, Any]]]) -> World:
    """A kernel composed of ``rows`` and one agent whose session has logged ``events``."""
    kernel = Kernel()
    await kernel.load(rows)
    session = kernel.ctx.require(SESSIONS).new(make_header("bench", 1, cwd=str(cwd)))
    agent = Agent(session)
    agent.ctx = create_scope(kernel.ctx, agent).ctx
    session.scope = agent
    for event_type, data in events:
        session.append(event_type, data)
    return World(kernel, agent)


async def world(cwd: Path, mode: str) -> World:
    rows = [Row(id=n, name=n, config=c) for n, c in ROWS]
    return await open_world(rows, cwd, [("sandbox/mode", {"mode": mode}), *OPEN_STEP])


def per_call(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:8.3f} ms  min {min(samples) * 1000:8.3f} ms  (n={len(samples)})"


async def timed(w: World, name: str, args: dict[str, Any], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await w.call(name, args)
        samples.append(time.perf_counter() - start)
    return samples


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        d = root / f"pkg{i % 100:02}" / f"mod{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def f{j}(x):\n    return x + {j}\n" for j in range(20))
        if i % 1000 == 0:
            body += "NEEDLE = True\n"
        (d / f"file{i:05}.py").write_text(body)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--greps", type=int, default=5)
    parser.add_argument("--bash", type=int, default=40)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-tools-") as tmp:
        root = Path(tmp)
        (root / "a.py").write_text("".join(f"line {i}\n" for i in range(200)))
        make_tree(root / "tree", opts.files)
        w = await world(root, "danger-full-access")
        try:
            await timed(w, "read", {"file_path": "a.py"}, 50)
            reads = [await timed(w, "read", {"file_path": "a.py", "offset": 1 + i % 100}, 1) for i in range(opts.reads)]
            print(f"{'read (200-line file)':32}{per_call([s for (s,) in reads])}")
            grep_args = {"pattern": "NEEDLE", "path": "tree"}
            glob_args = {"pattern": "*.py", "path": "tree"}
            path = os.environ.get("PATH", "")
            if shutil.which("rg"):
                print(f"{f'grep {opts.files} files (rg)':32}{per_call(await timed(w, 'grep', grep_args, opts.greps))}")
                print(f"{f'glob {opts.files} files (rg)':32}{per_call(await timed(w, 'glob', glob_args, opts.greps))}")
            os.environ["PATH"] = str(root / "no-bin")
            try:
                print(
                    f"{f'grep {opts.files} files (python)':32}{per_call(await timed(w, 'grep', grep_args, opts.greps))}"
                )
                print(
                    f"{f'glob {opts.files} files (python)':32}{per_call(await timed(w, 'glob', glob_args, opts.greps))}"
                )
            finally:
                os.environ["PATH"] = path
            echo = {"description": "Echo a word", "command": "echo hi"}
            print(f"{'bash echo (unconfined)':32}{per_call(await timed(w, 'bash', echo, opts.bash))}")
        finally:
            await w.kernel.dispose()
        found, detail = await Bwrap().find()
        if found is None:
            print(f"{'bash echo (bwrap)':32}skipped: {detail or 'bwrap not on PATH'}")
            return
        w = await world(root, "workspace-write")
        try:
            echo = {"description": "Echo a word", "command": "echo hi"}
            print(f"{'bash echo (bwrap)':32}{per_call(await timed(w, 'bash', echo, opts.bash))}")
        finally:
            await w.kernel.dispose()


if __name__ == "__main__":
    asyncio.run(main())
