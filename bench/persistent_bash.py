"""Persistent-bash benchmark: time and peak RSS of a command that prints a lot through the PTY.

Run: python bench/persistent_bash.py [--megabytes 200]
One ``persistent-bash`` call prints ``--megabytes`` MB of text; the harness keeps only what the
clipped result can show, so peak RSS should stay near its starting value whatever the size.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.tools.harness import harness  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(megabytes: int) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="pydsh-bench-ws-"))
    world = await harness(workspace, [("tools", None), ("persistent-bash", None)], startup=True)
    try:
        await world.text("bash", {"command": "true"})
        before = peak_rss_mb()
        started = time.perf_counter()
        out = await world.text("bash", {"command": f"head -c {megabytes * 1_000_000} /dev/zero | tr '\\0' a"})
        elapsed = time.perf_counter() - started
        assert out.endswith("[Command finished with exit code 0]"), out[-200:]
        print(f"output: {megabytes} MB through the PTY in {elapsed:.2f} s ({megabytes / elapsed:.0f} MB/s)")
        print(f"peak RSS: {before:.1f} MB before the call, {peak_rss_mb():.1f} MB after")
        print(f"result: {len(out)} characters")
    finally:
        await world.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=int, default=200)
    asyncio.run(main(parser.parse_args().megabytes))
