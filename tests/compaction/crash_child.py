"""Child of the SIGKILL trials: resume a session and compact it with a slow summariser.

Usage: ``python -m tests.compaction.crash_child SESSION_ID``; prints ``ready`` just before the
compaction starts (``DSH_HOME`` names the trial's copy of the store).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from pydsh.compaction.keys import COMPACTION
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.scripted import compile_entry, play
from pydsh.session.keys import SESSIONS
from tests.compaction.helpers import compaction_host, summary_text

PACE_MS = 4


async def main(session_id: str) -> None:
    host, _summariser = await compaction_host([], window=128000)

    async def slow_summary(options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        if options.get("purpose") != "compaction":
            return await nxt()
        entry = compile_entry({"text": summary_text("slow " * 20)}, 1, chunk_size=16)
        return play(entry, options, PACE_MS)

    host.kernel.ctx.on(LLM_STREAM, slow_summary, before=LLM_STREAM.order, global_=True)
    handle = await host.agents.resume(session_id)
    await host.kernel.ctx.require(SESSIONS).flush(handle.agent.session)
    print("ready", flush=True)
    await host.kernel.ctx.require(COMPACTION).compact_now(handle.agent, None, "crash-trial")
    print("done", flush=True)
    await handle.dispose()
    await host.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
