"""Token-meter benchmark: the meter's cost per step on a 100-message history (target < 1 ms per step).

Run: python bench/meter.py
A scripted session of 50 turns (about 100 model-visible messages, tool schemas in every header)
is built in process. Then, per step: one new user message is appended and ``measure`` is called
(the incremental cost a step pays), a cold ``measure`` on a fresh meter (a resumed session's
first step), and a full fold of the three projection units over the whole log.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pydsh.compaction.keys import TOKEN_METER  # noqa: E402
from pydsh.compaction.meter import UNITS, TokenMeter  # noqa: E402
from pydsh.contract.agent import user_message  # noqa: E402
from tests.agent.harness import start_host  # noqa: E402

TURNS = 50
USAGE = {"inputTokens": 9000, "outputTokens": 40, "cacheReadTokens": 2000}


def ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1000:.3f} ms, p95 {sorted(samples)[int(len(samples) * 0.95)] * 1000:.3f} ms"


async def main() -> None:
    scripts = [{"text": f"answer number {i} " * 20, "usage": USAGE} for i in range(TURNS)]
    host = await start_host(scripts)
    with tempfile.TemporaryDirectory() as cwd:
        agent = (await host.create(Path(cwd))).agent
        for i in range(TURNS):
            agent.followup(user_message(f"question {i} " * 30))
            await agent.when_idle()
        session = agent.session
        messages = len(session.derive_messages())
        meter: TokenMeter = host.kernel.ctx.require(TOKEN_METER)
        meter.measure(session)

        step: list[float] = []
        for i in range(200):
            message = user_message(f"steer {i}")
            session.append("user/message", message, surface_op="append")
            t0 = time.perf_counter()
            meter.measure(session)
            step.append(time.perf_counter() - t0)

        cold: list[float] = []
        for _ in range(50):
            fresh = TokenMeter()
            t0 = time.perf_counter()
            fresh.measure(session)
            cold.append(time.perf_counter() - t0)

        units = [unit() for unit in UNITS]
        folds: list[float] = []
        for _ in range(50):
            t0 = time.perf_counter()
            for unit in units:
                state = unit.init(session.header, 0)
                for event in session.events:
                    state = unit.apply(state, event)
            folds.append(time.perf_counter() - t0)
        await host.close()
    print(f"history: {messages} messages at the start, {len(session.events)} events at the end")
    print(f"measure per step (one new message, warm fold): {ms(step)}")
    print(f"measure cold (fresh meter, whole log):         {ms(cold)}")
    print(f"three projection units over the whole log:     {ms(folds)}")


if __name__ == "__main__":
    asyncio.run(main())
