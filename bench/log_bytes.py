"""Session log bytes on disk: pydsh's ``sdk`` profile next to the reference runtime's.

Run: python bench/log_bytes.py [--reference PATH] [--reads 5]
Each runtime is started through our SDK client on a fresh ``DSH_HOME`` with the loopback mock as
its model, once per session shape, and the session's log is measured after the process exits (so
every batch is on disk): a session of one plain prompt (the whole log: header, setup and the first
request with its tool schemas), what a second plain prompt adds, and what one ``read`` step adds
(a prompt with ``--reads`` steps, each reading a different 20-line file, against the first prompt).
The reference is measured when ``--reference`` or ``PYDSH_REFERENCE_DSH`` names its executable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer

LINES = "".join(f"line {n}: the quick brown fox jumps over the lazy dog\n" for n in range(20))


@dataclass
class Sizes:
    """Bytes on disk (and decoded) of one session's log."""

    disk: int
    plain: int


def log_sizes(home: Path) -> Sizes:
    """Sizes of the one session log under ``home``, decoding zstd frames for the plain size."""
    [path] = [p for p in (home / "sessions").rglob("session.v4.jsonl*") if not p.name.endswith(".lock")]
    data = path.read_bytes()
    if path.suffix != ".zstd":
        return Sizes(len(data), len(data))
    import zstandard

    plain = 0
    while data:
        reader = zstandard.ZstdDecompressor().decompressobj()
        plain += len(reader.decompress(data))
        data = reader.unused_data
    return Sizes(len(path.read_bytes()), plain)


async def session(runtime: str | None, workspace: Path, sequence: list[Any], prompts: list[str]) -> Sizes:
    """Run ``prompts`` in one session of ``runtime`` (``None``: pydsh) and measure its log after exit."""
    home = Path(tempfile.mkdtemp(prefix="bench-log-home-"))
    settings: dict[str, Any] = {"cwd": workspace, "dsh_home": home, "api_key": "sk-bench"}
    if runtime is not None:
        settings["dsh_bin"] = runtime
    async with (
        MockModelServer(sequence=sequence, chunkDelayMs=0) as server,
        AsyncHarness(base_url=server.base_url, **settings) as harness,
    ):
        handle = harness.session("bench")
        for prompt in prompts:
            result = await handle.run(prompt)
            if result.finish_reason != "completed":
                raise SystemExit(f"{runtime or 'pydsh'}: prompt {prompt!r} ended {result.finish_reason}")
    return log_sizes(home)


async def measure(runtime: str | None, workspace: Path, reads: int) -> dict[str, Sizes]:
    """Whole log of one plain prompt, and the bytes a second plain prompt and one read step add."""
    answer = {"text": "Done: nothing else to do here."}
    one = await session(runtime, workspace, [answer], ["Say something short."])
    two = await session(runtime, workspace, [answer, answer], ["Say something short.", "Once more."])
    calls = [{"tool_calls": [{"name": "read", "arguments": {"file_path": f"f{n}.txt"}}]} for n in range(reads)]
    stepped = await session(runtime, workspace, [*calls, answer], ["Say something short."])
    return {
        "one plain prompt (whole log)": one,
        "each further plain prompt": Sizes(two.disk - one.disk, two.plain - one.plain),
        "each read step": Sizes((stepped.disk - one.disk) // reads, (stepped.plain - one.plain) // reads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reference", default=os.environ.get("PYDSH_REFERENCE_DSH", ""))
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-log-ws-") as directory:
        workspace = Path(directory)
        for n in range(args.reads):
            (workspace / f"f{n}.txt").write_text(LINES.replace("fox", f"fox {n}"))
        runtimes: dict[str, str | None] = {"pydsh sdk (zstd)": None}
        if args.reference:
            runtimes["reference sdk"] = args.reference
        results = {name: asyncio.run(measure(path, workspace, args.reads)) for name, path in runtimes.items()}
    print(f"{'bytes on disk (decoded JSONL)':32}" + "".join(f"{name:>28}" for name in results))
    for row in next(iter(results.values())):
        cells = "".join(f"{f'{r[row].disk} ({r[row].plain})':>28}" for r in results.values())
        print(f"{row:32}{cells}")
    if not args.reference:
        print("reference not measured: pass --reference or set PYDSH_REFERENCE_DSH to its executable")


if __name__ == "__main__":
    main()
