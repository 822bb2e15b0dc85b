"""`read` of very large files: wall time and peak resident set of the process doing the read.

Run: python bench/file_read.py [--sparse-gib 1] [--text-mib 256]
Each measurement runs in its own child process (its ``ru_maxrss`` after the read), through the real tool
pipeline: a baseline child that only composes the tools, then ``read`` of a sparse file created with
``os.truncate`` (all NUL bytes: detected as binary in the first chunk), then ``read`` of the first
lines of a text file, which streams the whole file to count its lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.tools.harness import FS, harness, text_of  # noqa: E402


async def child(path: str | None) -> None:
    """Compose the file tools and, given a path, read its first lines; print seconds, peak RSS and the result."""
    h = await harness(Path(tempfile.gettempdir()), FS)
    try:
        elapsed, result = 0.0, "(compose only)"
        if path is not None:
            start = time.perf_counter()
            outcome = await h.call("read", {"file_path": path, "limit": 20})
            elapsed = time.perf_counter() - start
            result = text_of(outcome).splitlines()[0][:60]
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{elapsed:.3f}\t{peak_kib}\t{result}")
    finally:
        await h.close()


def report(label: str, path: str | None) -> None:
    """Run one child process and print its numbers."""
    argv = [sys.executable, __file__, "--child", *([path] if path else [])]
    line = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    seconds, peak_kib, result = line.split("\t", 2)
    print(f"{label:36}{float(seconds):8.3f} s  peak RSS {int(peak_kib) / 1024:8.1f} MiB  {result}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sparse-gib", type=float, default=1.0)
    parser.add_argument("--text-mib", type=int, default=256)
    parser.add_argument("--child", nargs="?", const="", default=None)
    opts = parser.parse_args()
    if opts.child is not None:
        asyncio.run(child(opts.child or None))
        return
    with tempfile.TemporaryDirectory(prefix="pydsh-bench-read-") as tmp:
        sparse = os.path.join(tmp, "sparse.bin")
        with open(sparse, "wb"):
            pass
        os.truncate(sparse, int(opts.sparse_gib * 1024**3))
        text = os.path.join(tmp, "big.txt")
        line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
        block = line * (1024 * 1024 // len(line))
        with open(text, "wb") as f:
            for _ in range(opts.text_mib):
                f.write(block)
        report("baseline (tools composed, no read)", None)
        report(f"read {opts.sparse_gib:g} GiB sparse file", sparse)
        report(f"read {opts.text_mib} MiB text file (20 lines)", text)


if __name__ == "__main__":
    main()
