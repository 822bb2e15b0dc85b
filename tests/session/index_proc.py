"""Child process for the session-index tests (run with ``python -m``): list a store through its index."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from pydsh.kernel import Kernel
from pydsh.kernel.compose import Row
from pydsh.session.keys import SESSION_INDEX


async def listing(root: Path, index: Path) -> None:
    """Print ``{id: [title, turns]}`` of every stored session once the index has folded them all."""
    kernel = Kernel()
    await kernel.load(
        [
            Row(id="session", name="session"),
            Row(id="persistence", name="session-persistence-jsonl", config={"root": str(root)}),
            Row(id="title", name="session-title"),
            Row(id="index", name="session-index", config={"path": str(index), "busyTimeoutMs": 10000}),
        ]
    )
    service = kernel.ctx.require(SESSION_INDEX)
    await service.settled()
    entries, _more = await service.page(1000)
    print(json.dumps({e.id: [e.fold.title_text(), e.fold.turns] for e in entries}), flush=True)
    await kernel.dispose()


if __name__ == "__main__":
    asyncio.run(listing(Path(sys.argv[1]), Path(sys.argv[2])))
