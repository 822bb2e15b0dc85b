"""Child process for the crash and single-writer tests (run with ``python -m``)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from pydsh.session.events import build_event, make_header
from pydsh.session.persistence.jsonl import JsonlPersistence


def title(seq: int) -> dict[str, object]:
    data = {"title": f"t{seq}", "messageSeqs": [], "source": {"kind": "user"}}
    return build_event("session/title", seq, 1_700_000_000_000 + seq, data)


async def writer(root: Path, session_id: str) -> None:
    """Append forever; report each explicit flush so the parent knows what is durable."""
    store = JsonlPersistence(root)
    handle = await store.create(make_header(session_id, 1, cwd="/w"))
    seq = 0
    while True:
        for _ in range(50):
            handle.append([title(seq)])
            seq += 1
        if seq % 200 == 0:
            await handle.flush()
            print(f"flushed {seq}", flush=True)
        await asyncio.sleep(0.001)


async def holder(root: Path, session_id: str, seconds: float) -> None:
    """Open an existing session for writing and hold it; print whether that worked."""
    store = JsonlPersistence(root)
    try:
        handle = await store.open(session_id, "write")
    except Exception as exc:
        print(f"refused {type(exc).__name__}", flush=True)
        return
    print("owner", flush=True)
    time.sleep(seconds)
    await handle.close()


if __name__ == "__main__":
    mode, root, sid = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if mode == "writer":
        asyncio.run(writer(root, sid))
    else:
        asyncio.run(holder(root, sid, float(sys.argv[4])))
