"""``pydsh batch`` on the local pool, end to end: 50 scripted tasks, a kill and a rerun, Ctrl-C, bad input."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import zstandard

from pydsh.batch.worker import CONTINUE
from pydsh.testing.mock_model_server import MockModelServer
from tests.batch.scripts import PASS, Scripts, check_fifty, fifty_tasks, results, task, write_tasks


@pytest.fixture
async def mock() -> AsyncIterator[tuple[MockModelServer, Scripts]]:
    scripts = Scripts({})
    async with MockModelServer(choose=scripts.choose, hold=scripts.hold, chunkDelayMs=0) as server:
        yield server, scripts
        scripts.release.set()


async def batch(server: MockModelServer, *args: str) -> asyncio.subprocess.Process:
    """``python -m pydsh batch ARGS`` against the mock model, output captured."""
    env = {**os.environ, "DEEPSEEK_BASE_URL": server.base_url, "DEEPSEEK_API_KEY": "test-key"}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pydsh",
        "batch",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def session_text(log: str) -> str:
    """A session log's lines as text (zstd or plain)."""
    raw = Path(log).read_bytes()
    if log.endswith(".zstd"):
        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True).read()
    return raw.decode()


async def test_fifty_tasks_mixed_outcomes_complete_on_the_local_pool(
    tmp_path: Path, mock: tuple[MockModelServer, Scripts]
) -> None:
    server, scripts = mock
    tasks = fifty_tasks(tmp_path, scripts)

    code, out, err = await finish(await batch(server, str(tasks), "--workers", "2"))

    assert code == 1, err
    records = results(tmp_path / "tasks.batch" / "results.jsonl")
    check_fifty(records, scripts)
    assert "[task t00]" in session_text(next(r["log"] for r in records if r["id"] == "t00"))
    assert "Traceback" not in err
    assert re.search(r"^total\s+53\s+39\s", out, re.MULTILINE), out


async def test_a_rate_limit_pauses_the_other_tasks_on_its_route(
    tmp_path: Path, mock: tuple[MockModelServer, Scripts]
) -> None:
    server, scripts = mock
    ids = [f"r{i}" for i in range(8)]
    scripts.plans = {i: PASS for i in ids}
    scripts.rate_limited["r0"] = 1
    write_tasks(tmp_path / "tasks.jsonl", [task(i) for i in ids])

    code, _, err = await finish(await batch(server, str(tmp_path / "tasks.jsonl"), "--workers", "2"))

    assert code == 0, err
    opens_at = float((tmp_path / "tasks.batch" / "gates" / "deepseek-official").read_text())
    refused = next(t for t, _, _, b in scripts.calls if b == "rate_limit")
    # A call already past its gate when the 429 came back may still arrive just after it.
    during = [(round(t - refused, 2), task) for t, task, _, _ in scripts.calls if refused + 0.2 < t < opens_at - 0.1]
    assert during == []
    assert sum(1 for t, *_ in scripts.calls if t > opens_at) > 1


async def wait_until(condition: object, proc: asyncio.subprocess.Process) -> None:
    """Poll ``condition`` while the batch runs (the batch ending first fails the test)."""
    while not condition():  # type: ignore[operator]
        assert proc.returncode is None, (await proc.stderr.read()).decode() if proc.stderr else ""
        await asyncio.sleep(0.05)


async def test_a_killed_batch_reruns_only_what_was_missing_and_resumes_from_logs(
    tmp_path: Path, mock: tuple[MockModelServer, Scripts]
) -> None:
    server, scripts = mock
    ids = [f"k{i}" for i in range(8)]
    scripts.plans = {i: PASS for i in ids}
    scripts.held = {"k6", "k7"}
    write_tasks(tmp_path / "tasks.jsonl", [task(i) for i in ids])
    proc = await batch(server, str(tmp_path / "tasks.jsonl"), "--workers", "2")
    await wait_until(lambda: len(scripts.waiting) == 2, proc)
    proc.kill()
    await proc.wait()
    kept = results(tmp_path / "tasks.batch" / "results.jsonl")
    assert sorted(r["id"] for r in kept) == ids[:6]

    scripts.held = set()
    before = len(scripts.calls)
    code, _, err = await finish(await batch(server, str(tmp_path / "tasks.jsonl"), "--workers", "2"))

    assert code == 0, err
    records = results(tmp_path / "tasks.batch" / "results.jsonl")
    assert records[:6] == kept
    assert sorted(r["id"] for r in records) == ids and all(r["passed"] for r in records)
    rerun = scripts.calls[before:]
    assert {task for _, task, _, _ in rerun} == {"k6", "k7"}
    assert all(step == 1 for _, _, step, _ in rerun)
    resumed = {r["id"]: r for r in records}["k6"]
    log = session_text(resumed["log"])
    assert CONTINUE in log and '"turn":2,"reason":{"kind":"completed"}' in log
    assert "pydsh batch: 2 tasks to run (6 finished before)" in err


async def test_ctrl_c_stops_cleanly_and_the_rerun_finishes(
    tmp_path: Path, mock: tuple[MockModelServer, Scripts]
) -> None:
    server, scripts = mock
    ids = ["c0", "c1", "c2"]
    scripts.plans = {i: PASS for i in ids}
    scripts.held = {"c1", "c2"}
    write_tasks(tmp_path / "tasks.jsonl", [task(i) for i in ids])
    proc = await batch(server, str(tmp_path / "tasks.jsonl"), "--workers", "2")
    await wait_until(lambda: len(scripts.waiting) == 2, proc)
    proc.send_signal(signal.SIGINT)
    code, out, err = await finish(proc)

    assert code == 130
    assert "c1 interrupted; it resumes when the batch runs again" in err
    assert "run the same command again" in err and "Traceback" not in err
    assert [r["id"] for r in results(tmp_path / "tasks.batch" / "results.jsonl")] == ["c0"]
    assert re.search(r"^total\s+1\s+1\s", out, re.MULTILINE), out

    scripts.held = set()
    code, _, err = await finish(await batch(server, str(tmp_path / "tasks.jsonl"), "--workers", "2"))
    assert code == 0, err
    assert sorted(r["id"] for r in results(tmp_path / "tasks.batch" / "results.jsonl")) == ids


async def test_usage_errors_are_one_line(tmp_path: Path, mock: tuple[MockModelServer, Scripts]) -> None:
    server, _ = mock
    code, _, err = await finish(await batch(server, str(tmp_path / "nothing.jsonl")))
    assert (code, err) == (2, f"pydsh batch: no task file or directory at {tmp_path / 'nothing.jsonl'}\n")
    (tmp_path / "t.jsonl").write_text("")
    code, _, err = await finish(await batch(server, str(tmp_path / "t.jsonl"), "--workers", "0"))
    assert (code, err) == (2, "pydsh batch: --workers must be at least 1\n")
