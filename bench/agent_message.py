"""Cross-session messaging benchmark (spec 09): harness time of ``send_agent_message`` and bulk receipts.

Run: python bench/agent_message.py
In one scripted host, 10 live root sessions each hold a turn open (so deliveries queue and no model
turn runs); the pair rate limit is off. Phase 1: 1,000 sends round-robin between the sessions (each
through the plugin's tool body, as the loop calls it): ms per send. Phase 2: ``check_delivery`` over
those 1,000 ids, one bulk call per target (10 calls, one log read each). Phase 3: 1,000 sends into one
session, then one bulk ``check_delivery`` over its 1,000 ids.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "plugins" / "agent-message")]

from tests_agent_message.world import entered, gate_call, world  # noqa: E402

SESSIONS = 10
SENDS = 1000


async def main() -> None:
    scripts = [[gate_call(f"s{i}")] for i in range(SESSIONS)]
    async with world(scripts, config={"rateLimit": None}) as w:
        agents = [await w.root() for _ in range(SESSIONS)]
        runs = []
        for i, agent in enumerate(agents):
            runs.append(asyncio.ensure_future(agent.run("hold")))
            await entered(f"s{i}")
        ids = [a.session_id for a in agents]
        per_send = []
        for n in range(SENDS):
            sender, target = agents[n % SESSIONS], ids[(n + 1 + n // SESSIONS) % SESSIONS]
            if target == sender.session_id:
                target = ids[(n + 2) % SESSIONS]
            start = time.perf_counter()
            await w.send(sender, target, f"message {n}")
            per_send.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        found = 0
        for i, target in enumerate(ids):
            found += len((await w.check(agents[(i + 1) % SESSIONS], target))["entries"])
        bulk_ms = (time.perf_counter() - start) * 1000
        print(f"send_agent_message: {SENDS} sends between {SESSIONS} live sessions")
        print(
            f"  per send ms: mean {statistics.mean(per_send):.3f}  median {statistics.median(per_send):.3f}  "
            f"p95 {sorted(per_send)[int(0.95 * SENDS)]:.3f}  max {max(per_send):.3f}"
        )
        print(f"check_delivery over {found} ids (10 bulk calls, one per target): {bulk_ms:.1f} ms total")
        w_target = ids[0]
        for n in range(SENDS):
            await w.send(agents[1 + n % (SESSIONS - 1)], w_target, f"again {n}")
        start = time.perf_counter()
        entries = (await w.check(agents[1], w_target))["entries"]
        one_ms = (time.perf_counter() - start) * 1000
        print(f"check_delivery over {len(entries)} ids of one target (1 bulk call): {one_ms:.1f} ms")
        for run in runs:
            run.cancel()


if __name__ == "__main__":
    asyncio.run(main())
