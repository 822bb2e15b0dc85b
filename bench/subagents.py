"""Subagent benchmark: memory of 100 continuable children and the time to list them.

Run: python bench/subagents.py [--children 100]
1. Resident idle children: 100 child agents (child headers, descriptor prefix, delegated policy)
   created in one process and left idle; resident-set growth per child.
2. Delegated children: one root delegates 100 continuable children through the ``subagent`` tool
   (scripted model); each answers and settles, leaving memory while its log stays addressable.
   Resident-set growth per child, and the time of ``list_agents`` over all 100.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.agent.registry import CreateAgentOptions  # noqa: E402
from pydsh.contract.agent import AgentOptions, user_message  # noqa: E402
from pydsh.contract.tools import ToolExec  # noqa: E402
from pydsh.kernel.cancel import NEVER  # noqa: E402
from pydsh.messaging.tools import Messaging  # noqa: E402
from pydsh.session.events import build_event  # noqa: E402
from pydsh.subagents.keys import SUBAGENTS  # noqa: E402
from tests.agent.harness import start_host  # noqa: E402
from tests.subagents.helpers import quiesce  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def traced_mb() -> float:
    """Python heap in use (tracemalloc), which RSS hides behind freed-but-kept arenas."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


async def resident(count: int, workspace: Path) -> None:
    host = await start_host([{"text": "root"}])
    root = (await host.create(workspace)).agent
    before, before_rss = traced_mb(), rss_mb()
    handles = []
    for i in range(count):
        descriptor = build_event(
            "subagent/descriptor", 0, 1, {"version": 3, "mode": "continuable", "provider": "spawn", "label": f"c{i}"}
        )
        handles.append(
            await host.agents.create(
                CreateAgentOptions(
                    cwd=str(workspace),
                    parent_session=root.id,
                    origin="subagent",
                    delegation_depth=1,
                    prefix_events=[descriptor],
                    agent_options=AgentOptions(subagent_depth=1),
                )
            )
        )
    grown, grown_rss = traced_mb() - before, rss_mb() - before_rss
    print(
        f"resident idle children: {count} use {grown:.1f} MB of Python heap = {1024 * grown / count:.0f} KB per child "
        f"(RSS grew {grown_rss:.1f} MB; target < 1 MB per child)"
    )
    await host.close()


async def delegated(count: int, workspace: Path) -> None:
    calls = [{"name": "subagent", "arguments": {"description": f"task {i}", "prompt": "answer"}} for i in range(count)]
    root_script: list[Any] = [{"tool_calls": calls}, {"text": "waiting"}]
    root_script += [{"text": "noted"}] * count
    root_script += [{"tool_calls": [{"name": "list_agents", "arguments": {}}]}, {"text": "listed"}]
    scripts = [root_script] + [[{"text": f"result {i}"}] for i in range(count)]
    patch = [{"id": "subagent", "config": {"maxActiveSubagents": count}}]
    host = await start_host(scripts, patches=(patch,))
    root = (await host.create(workspace)).agent
    before = traced_mb()

    root.followup(user_message("delegate"))
    await quiesce(host, timeout=120)
    grown = traced_mb() - before
    print(
        f"delegated children (settled, still addressable): {count} keep {grown:.1f} MB of Python heap "
        f"= {1024 * grown / count:.0f} KB per child"
    )
    messaging = host.kernel.ctx.require(SUBAGENTS)
    started = time.perf_counter()
    rows = [await messaging.full_name(e.child_id) for e in await messaging.catalog_of(root.id)]
    print(f"resolving the names of {len(rows)} children: {1000 * (time.perf_counter() - started):.1f} ms")
    lister = Messaging(host.kernel.ctx)
    started = time.perf_counter()
    exec = ToolExec("bench", "list_agents", "{}", {}, root, root.session, None, None, NEVER, root)
    outcome = await lister.list_agents({}, exec)
    elapsed = time.perf_counter() - started
    lines = outcome.content[0]["text"].count("\n") + 1
    print(f"list_agents over {lines} children: {1000 * elapsed:.1f} ms")
    await host.close()


async def main(count: int) -> None:
    os.environ.setdefault("DSH_HOME", tempfile.mkdtemp(prefix="pydsh-bench-home-"))
    tracemalloc.start()
    workspace = Path(tempfile.mkdtemp(prefix="pydsh-bench-ws-"))
    await resident(count, workspace)
    await delegated(count, workspace)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, default=100)
    asyncio.run(main(parser.parse_args().children))
