"""SIGKILL during compaction never leaves a log that fails to load or a half-applied summary (spec 10 §4.6)."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydsh.session.log import Session
from pydsh.session.persistence.jsonl import JsonlPersistence
from tests.compaction.helpers import canon, compaction_host, write_lines
from tests.logs import PLAIN_LOGS, stored_log

REPO = Path(__file__).resolve().parents[2]
TRIALS = 30
WINDOW_S = 0.6
"""Kill delays are drawn from 0..WINDOW_S after the child reports ready (the compaction takes about 0.3 s)."""


def read(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "f.txt", "offset": n, "limit": 10}}]}


async def make_session(cwd: Path, *, plain: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """A session of six reads; ``plain`` writes its log as plain lines (for tests that cut it line by line)."""
    write_lines(cwd / "f.txt", 100)
    script = [read(i * 10 + 1) for i in range(6)] + [{"text": "done"}]
    host, _s = await compaction_host(script, window=128000, patches=(PLAIN_LOGS,) if plain else ())
    try:
        handle = await host.create(cwd)
        await host.run(handle.agent, "read f.txt")
        session = handle.agent.session
        view = session.derive_messages()
        await handle.dispose()
        return session.id, view
    finally:
        await host.close()


def trial(home: Path, session_id: str, delay: float) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSH_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.compaction.crash_child", session_id],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", proc.communicate()[1]
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _err = proc.communicate(timeout=30)
    return proc.returncode, out


async def load(home: Path, session_id: str) -> Session:
    store = JsonlPersistence(home / "sessions")
    handle = await store.open(session_id, "write")
    try:
        return Session(handle.header, await handle.read())
    finally:
        await handle.close()


def test_sigkill_at_random_points_of_a_compaction(tmp_path: Path) -> None:
    template = Path(os.environ["DSH_HOME"])
    session_id, old_view = asyncio.run(make_session(tmp_path))
    rng = random.Random(10)
    delays = [rng.uniform(0, WINDOW_S) for _ in range(TRIALS)]
    homes = [tmp_path / f"trial-{i}" for i in range(TRIALS)]
    for home in homes:
        shutil.copytree(template, home)
    with ThreadPoolExecutor(max_workers=3) as pool:
        outcomes = list(
            pool.map(lambda args: trial(*args), [(h, session_id, d) for h, d in zip(homes, delays, strict=True)])
        )
    applied = 0
    for home, (_code, out) in zip(homes, outcomes, strict=True):
        session = asyncio.run(load(home, session_id))
        events = session.events
        checkpoints = [e for e in events if e["type"] == "user/message" and e.get("surfaceOp") != "append"]
        view = session.derive_messages()
        if not checkpoints:
            assert not out.endswith("done\n"), "a finished manual compaction was flushed"
            assert canon(view) == canon(old_view)
            continue
        applied += 1
        (checkpoint,) = checkpoints
        summary = events[checkpoint["seq"] - 1]
        assert summary["type"] == "compaction/summary"
        cid = checkpoint["data"]["source"]["compactionId"]
        assert summary["data"]["compactionId"] == cid
        assert checkpoint["sourceEventSeqs"][1] == summary["seq"]
        assert canon(view) == canon([old_view[0], checkpoint["data"]])
        assert summary["data"]["shadowedSeqs"] == checkpoint["sourceEventSeqs"][2:]
    assert applied >= sum(1 for _code, out in outcomes if out.endswith("done\n"))


def test_a_torn_write_anywhere_in_the_compaction_leaves_old_or_new(tmp_path: Path) -> None:
    """Cut a finished compaction's log at every line boundary and inside every line it wrote."""
    template = Path(os.environ["DSH_HOME"])
    session_id, old_view = asyncio.run(make_session(tmp_path, plain=True))
    home = tmp_path / "done"
    shutil.copytree(template, home)
    code, out = trial_to_the_end(home, session_id)
    assert code == 0 and out.endswith("done\n")
    path = stored_log(home)
    assert path.name == "session.v4.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    first = len(b"".join(lines[: len(lines) - 5]))
    cuts = sorted({*range(first, len(data) + 1, 97), *(len(b"".join(lines[:i])) for i in range(len(lines) + 1))})
    outcomes = set()
    for cut in (c for c in cuts if c >= first):
        path.write_bytes(data[:cut])
        session = asyncio.run(load(home, session_id))
        view = canon(session.derive_messages())
        checkpoint = [e for e in session.events if e["type"] == "user/message" and e.get("surfaceOp") != "append"]
        if checkpoint:
            assert view == canon([old_view[0], checkpoint[0]["data"]])
            outcomes.add("new")
        else:
            assert view == canon(old_view)
            outcomes.add("old")
    assert outcomes == {"old", "new"}


def trial_to_the_end(home: Path, session_id: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DSH_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-m", "tests.compaction.crash_child", session_id],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout
