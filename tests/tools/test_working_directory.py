"""working_directory through the pipeline: reading, changing, errors, a vanished directory (spec 05 §4.9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness, harness, text_of


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, [("tools", None), ("tool-working-directory", None), ("tool-fs", None)])
    yield world
    await world.close()


async def test_working_directory_reads_and_changes(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "pkg" / "src").mkdir(parents=True)
    assert await h.text("working_directory", {}) == str(tmp_path)
    assert await h.text("working_directory", {"cd": "pkg"}) == str(tmp_path / "pkg")
    (event,) = h.events("working-directory/change")
    assert event["data"] == {"cwd": str(tmp_path / "pkg")}
    (note,) = h.agent.injected
    assert note["content"][0]["text"] == f'The working directory changed from "{tmp_path}" to "{tmp_path / "pkg"}".'
    assert note["source"] == {"kind": "working-directory"}
    assert await h.text("working_directory", {"cd": "src"}) == str(tmp_path / "pkg" / "src")
    assert await h.text("working_directory", {"cd": str(tmp_path)}) == str(tmp_path)
    (tmp_path / "pkg" / "src" / "f.txt").write_text("hello\n")
    await h.call("working_directory", {"cd": "pkg/src"})
    assert "1: hello" in await h.text("read", {"file_path": "f.txt"})


@pytest.mark.parametrize(
    ("cd", "message"),
    [("", "working-directory: cd must not be empty"), ("nope", 'working-directory: directory does not exist: "nope"')],
)
async def test_working_directory_errors(h: Harness, cd: str, message: str) -> None:
    outcome = await h.call("working_directory", {"cd": cd})
    assert (text_of(outcome), outcome.error) == (f"Error: {message}", None)
    assert h.events("working-directory/change") == []


async def test_vanished_directory_is_restored(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "gone").mkdir()
    await h.call("working_directory", {"cd": "gone"})
    (tmp_path / "gone").rmdir()
    assert await h.text("working_directory", {}) == str(tmp_path)
    assert h.agent.injected[-1]["content"][0]["text"] == (
        f'The working directory "{tmp_path / "gone"}" is unavailable. The working directory is now "{tmp_path}".'
    )
