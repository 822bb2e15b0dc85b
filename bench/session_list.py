"""Listing benchmark: ``session_query.list_sessions()`` over 1,000 stored sessions, in each encoding.

Run: python bench/session_list.py [--sessions 1000] [--events 200] [--runs 5]
Every session holds the same realistic log as ``bench/session_log.py`` writes (``--events`` events,
full tool schemas in its request headers) under its own header; a listing must read headers only.
Prints the cold ``list_sessions()`` of a fresh host (persistence scan, header reads, sort) as medians
of interleaved runs, wall and CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path
from typing import Any

from session_log import Clock, real_request_header, write_session

from pydsh.host import Host
from pydsh.session.events import make_header
from pydsh.session.persistence.jsonl import JsonlPersistence, encode_segment, project_key


def header_line(session_id: str, created_at: int, cwd: str) -> bytes:
    """A header line as the store writes it."""
    import json

    header = make_header(session_id, created_at, cwd=cwd)
    return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def body_of(path: Path) -> bytes:
    """Everything after the header line (plain) or the header frame (zstd) of a stored log."""
    data = path.read_bytes()
    if path.suffix != ".zstd":
        return data[data.index(b"\n") + 1 :]
    import zstandard

    reader = zstandard.ZstdDecompressor().decompressobj()
    reader.decompress(data)
    return reader.unused_data


def populate(root: Path, encoding: str, template: Path, cwd: str, count: int) -> None:
    """``count`` sessions in ``root`` sharing ``template``'s events, each under its own header."""
    body = body_of(template)
    store = JsonlPersistence(root, compression="zstd" if encoding == "zstd" else "none")
    for n in range(count):
        session_id = f"{encoding}-{n:05d}"
        directory = root / project_key(cwd) / encode_segment(session_id)
        directory.mkdir(parents=True)
        head = store.frame(header_line(session_id, 1_000 + n, cwd), encoding == "zstd")
        (directory / template.name).write_bytes(head + body)
        (directory / "session.lock").touch()


async def cold_list(home: Path, workspace: Path) -> tuple[tuple[float, float], int]:
    """``list_sessions()`` of a freshly started host: times and rows."""
    async with Host(dsh_home=home, cwd=workspace) as host:
        query: Any = host.ctx.require("session_query")
        clock = Clock()
        rows = await query.list_sessions()
        return clock.stop(), len(rows)


async def main(sessions: int, events: int, runs: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="pydsh-bench-list-"))
    workspace = base / "w"
    workspace.mkdir()
    header = await real_request_header(base / "capture", workspace)
    homes = {}
    for encoding in ("plain", "zstd"):
        scratch = base / f"template-{encoding}"
        await write_session(scratch, encoding, str(workspace), header, events)
        [template] = scratch.rglob("session.v4.jsonl*")
        homes[encoding] = base / f"home-{encoding}"
        populate(homes[encoding] / "sessions", encoding, template, str(workspace), sessions)
        print(f"{encoding:5}: {sessions} sessions of {events} events, {template.stat().st_size:,} bytes each")
    times: dict[str, list[tuple[float, float]]] = {e: [] for e in homes}
    for _ in range(runs):
        for encoding, home in homes.items():
            elapsed, rows = await cold_list(home, workspace)
            assert rows == sessions, rows
            times[encoding].append(elapsed)
    for encoding, measured in times.items():
        walls = [wall * 1000 for wall, _cpu in measured]
        cpu = statistics.median(c * 1000 for _w, c in measured)
        print(
            f"{encoding:5}: list_sessions() over {sessions} sessions median {statistics.median(walls):.0f} ms "
            f"(min {min(walls):.0f}, CPU {cpu:.0f}) (target <= 200 ms)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.events, args.runs))
