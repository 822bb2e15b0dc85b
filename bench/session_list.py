"""Listing benchmark: session lists over many stored sessions, in each encoding.

Run: python bench/session_list.py [--sessions 1000] [--events 200] [--runs 5] [--first-runs 3]
Every session holds the same realistic log as ``bench/session_log.py`` writes (``--events`` events,
full tool schemas in its request headers) under its own header. Prints, as medians of interleaved
runs (wall and CPU):

1. the cold ``session_query.list_sessions()`` of a fresh host (persistence scan, header reads, sort);
2. the first ``GET /api/sessions?limit=50`` of a fresh ``pydsh web`` server (in this process), the
   first ``hello`` of its index stream ``GET /api/events`` (time and size in bytes), and the first
   ``list_peer_agents`` of a fresh host composing the ``agent-message`` plugin — each once with the
   session index missing (``$DSH_HOME/index`` removed: the first start over logs pydsh did not index)
   and once with it built.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from session_log import Clock, real_request_header, summary, write_session

from pydsh.apps.web import bind, start_server
from pydsh.apps.web.options import WebOptions
from pydsh.apps.web.state import Config
from pydsh.contract.tools import TOOLS, ToolExec
from pydsh.host import Host
from pydsh.kernel.cancel import NEVER
from pydsh.session.events import make_header
from pydsh.session.keys import SESSION_INDEX, SESSION_QUERY
from pydsh.session.persistence.jsonl import JsonlPersistence, encode_segment, project_key
from pydsh.testing.hosts import ScriptedHost

AGENT_MESSAGE = {"insert": [{"id": "agent-message", "name": "pydsh_agent_message.plugin"}]}
PAGE = 50


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
    """``count`` sessions in ``root`` sharing ``template``'s events, each under its own header; each log's
    mtime is its last event's time, as the writer leaves it."""
    body = body_of(template)
    last_ns = template.stat().st_mtime_ns
    store = JsonlPersistence(root, compression="zstd" if encoding == "zstd" else "none")
    for n in range(count):
        session_id = f"{encoding}-{n:05d}"
        directory = root / project_key(cwd) / encode_segment(session_id)
        directory.mkdir(parents=True)
        head = store.frame(header_line(session_id, 1_000 + n, cwd), encoding == "zstd")
        log = directory / template.name
        log.write_bytes(head + body)
        os.utime(log, ns=(last_ns, last_ns))
        (directory / "session.lock").touch()


async def cold_list(home: Path, workspace: Path) -> tuple[tuple[float, float], int]:
    """``list_sessions()`` of a freshly started host: times and rows."""
    async with Host(dsh_home=home, cwd=workspace) as host:
        query: Any = host.ctx.require(SESSION_QUERY)
        clock = Clock()
        rows = await query.list_sessions()
        return clock.stop(), len(rows)


async def settle_index(host: Host) -> None:
    """Wait until the session index has folded every stored log (a no-op without an index)."""
    index: Any = host.ctx.get(SESSION_INDEX)
    if index is not None:
        await index.settled()


def drop_index(home: Path) -> None:
    """Remove the session index, as on the first start over logs pydsh did not index."""
    shutil.rmtree(home / "index", ignore_errors=True)


async def first_page(home: Path, workspace: Path) -> tuple[tuple[float, float], int]:
    """The first ``GET /api/sessions?limit=50`` of a fresh web server: times and rows."""
    async with ScriptedHost([], profile="web", cwd=workspace, dsh_home=home) as host:
        options = WebOptions(port=0, open_browser=False, cwd=str(workspace))
        server = await start_server(host, Config(), options, bind(options))
        try:
            async with httpx.AsyncClient(base_url=server.base, timeout=600) as client:
                assert (await client.get(f"/?token={server.token}")).status_code == 303
                clock = Clock()
                response = await client.get(f"/api/sessions?limit={PAGE}")
                elapsed = clock.stop()
                assert response.status_code == 200, response.text
                await settle_index(host)
                return elapsed, len(response.json()["sessions"])
        finally:
            await server.stop()


async def first_hello(home: Path, workspace: Path) -> tuple[tuple[float, float], int, int]:
    """The first index-stream ``hello`` of a fresh web server: times, its size in bytes and its sessions."""
    async with ScriptedHost([], profile="web", cwd=workspace, dsh_home=home) as host:
        options = WebOptions(port=0, open_browser=False, cwd=str(workspace))
        server = await start_server(host, Config(), options, bind(options))
        try:
            async with httpx.AsyncClient(base_url=server.base, timeout=600) as client:
                assert (await client.get(f"/?token={server.token}")).status_code == 303
                clock = Clock()
                async with client.stream("GET", "/api/events") as response:
                    lines = response.aiter_lines()
                    async for line in lines:
                        if line.startswith("data:"):
                            elapsed = clock.stop()
                            hello = json.loads(line[5:])
                            break
                await settle_index(host)
                return elapsed, len(line[5:].strip().encode()), len(hello["sessions"])
        finally:
            await server.stop()


async def first_peers(home: Path, workspace: Path) -> tuple[tuple[float, float], int]:
    """The first ``list_peer_agents`` (called by the host, no calling agent) of a fresh host: times and rows."""
    async with ScriptedHost([], cwd=workspace, dsh_home=home, patches=[[AGENT_MESSAGE]]) as host:
        definition = host.ctx.require(TOOLS).lookup(None, "list_peer_agents")
        exec = ToolExec("bench", "list_peer_agents", "{}", {}, None, None, None, None, NEVER, None)
        clock = Clock()
        outcome = await definition.execute({}, exec)
        elapsed = clock.stop()
        await settle_index(host)
        return elapsed, len(outcome.meta)


async def firsts(home: Path, workspace: Path, sessions: int, runs: int) -> None:
    """The first page, hello and peer list, with the index missing and with it built."""
    times: dict[str, list[tuple[float, float]]] = {}
    sizes: dict[str, int] = {}
    for _ in range(runs):
        for state in ("index missing", "index built"):
            if state == "index missing":
                drop_index(home)
            elapsed, rows = await first_page(home, workspace)
            assert rows == min(PAGE, sessions), rows
            times.setdefault(f"page/{state}", []).append(elapsed)
            if state == "index missing":
                drop_index(home)
            elapsed, size, rows = await first_hello(home, workspace)
            times.setdefault(f"hello/{state}", []).append(elapsed)
            sizes[state] = size
            if state == "index missing":
                drop_index(home)
            elapsed, rows = await first_peers(home, workspace)
            assert rows == sessions, rows
            times.setdefault(f"peers/{state}", []).append(elapsed)
    for state in ("index missing", "index built"):
        print(f"{state}:")
        print(f"  first GET /api/sessions?limit={PAGE}: {summary(times[f'page/{state}'])} (target < 500 ms)")
        print(f"  first index-stream hello: {summary(times[f'hello/{state}'])}, {sizes[state]:,} bytes")
        print(f"  first list_peer_agents ({sessions} rows): {summary(times[f'peers/{state}'])} (target < 500 ms)")
        sys.stdout.flush()


async def main(sessions: int, events: int, runs: int, first_runs: int) -> None:
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
    if first_runs:
        print(f"plain: {sessions} sessions, first lists of fresh hosts ({first_runs} runs)")
        await firsts(homes["plain"], workspace, sessions, first_runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first-runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.events, args.runs, args.first_runs))
