"""The Ray backend on a local Ray instance the tests start (``ray.init(num_cpus=2)``)."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import ray

from pydsh.batch.progress import PlainDisplay
from pydsh.batch.ray_backend import MARKER_FILE, RayBackend
from pydsh.batch.runner import Batch, Options
from pydsh.testing.mock_model_server import MockModelServer
from tests.batch.scripts import PASS, Scripts, check_fifty, fifty_tasks, task, write_tasks


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
async def mock(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Scripts]:
    scripts = Scripts({})
    async with MockModelServer(choose=scripts.choose, hold=scripts.hold, chunkDelayMs=0) as server:
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        yield scripts


async def run_on_ray(tasks: Path, out: Path, *, unshared: bool = False) -> tuple[list[dict[str, object]], str]:
    """The batch on the local Ray instance; ``unshared`` hides the output directory from the tasks."""
    backend = RayBackend("auto", out)
    if unshared:
        (out / MARKER_FILE).unlink()
    lines = io.StringIO()
    try:
        records = await Batch(tasks, Options(out=out, workers=2, ray="auto"), backend, PlainDisplay(lines)).run()
    finally:
        await backend.close()
    return records, lines.getvalue()


async def test_fifty_mixed_tasks_complete_on_a_local_ray_instance(
    local_ray: None, mock: Scripts, tmp_path: Path
) -> None:
    records, lines = await run_on_ray(fifty_tasks(tmp_path, mock), tmp_path / "out")

    check_fifty(records, mock)
    assert "[53/53]" in lines
    assert Path(str(records[0]["log"])).is_relative_to(tmp_path / "out" / "tasks")


async def test_a_task_on_a_node_without_the_output_directory_ships_its_log_back(
    local_ray: None, mock: Scripts, tmp_path: Path
) -> None:
    mock.plans = {"s0": PASS}
    tasks = write_tasks(tmp_path / "tasks.jsonl", [task("s0")])

    records, _ = await run_on_ray(tasks, tmp_path / "out", unshared=True)

    (record,) = records
    assert record["passed"] and record["workspace"] is None
    log = Path(str(record["log"]))
    assert log.is_relative_to(tmp_path / "out" / "tasks" / "s0" / "home") and log.stat().st_size > 0
    assert not (tmp_path / "out" / "tasks" / "s0" / "workspace").exists()


async def test_an_unreachable_ray_address_is_one_line(tmp_path: Path) -> None:
    write_tasks(tmp_path / "tasks.jsonl", [task("u0")])
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pydsh",
        "batch",
        str(tmp_path / "tasks.jsonl"),
        "--ray",
        "127.0.0.1:1",
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    _, err = await proc.communicate()
    assert (proc.returncode, err.decode()) == (
        2,
        "pydsh batch: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused\n",
    )
    assert not (tmp_path / "tasks.batch" / "results.jsonl").exists()
