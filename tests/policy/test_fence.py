"""The file fence of write/edit under each sandbox mode (spec 05 §5.4, §5.9)."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.tools import files
from tests.tools.harness import FS, POLICY, Harness, harness, text_of

HINT = (
    "[sandbox: escalation available — retry this exact operation once with sandbox_permissions "
    "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
)


def denied(mode: str) -> str:
    return f"Error: [sandbox: file access denied under {mode} mode]\n{HINT}"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the workspace and outside every temp area."""
    path = Path(tempfile.mkdtemp(prefix="pydsh-fence-", dir=Path.home()))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def world(tmp_path: Path, mode: str) -> Harness:
    w = tmp_path / "w"
    w.mkdir()
    return await harness(w, FS + POLICY[:2] + [("permission", {"mode": mode})], startup=True)


@pytest.fixture
async def ws(tmp_path: Path) -> Any:
    h = await world(tmp_path, "workspace-write")
    yield h
    await h.close()


async def test_absolute_escape_is_denied(ws: Harness, outside: Path) -> None:
    outcome = await ws.call("write", {"file_path": str(outside / "x.txt"), "content": "x"})
    assert text_of(outcome) == denied("workspace-write")
    assert outcome.error == {"name": "FsError", "code": "FS_SANDBOX_DENIED"}
    assert list(outside.iterdir()) == []


async def test_dotdot_escape_is_denied(ws: Harness, tmp_path: Path, outside: Path) -> None:
    relative = os.path.relpath(outside / "x.txt", tmp_path / "w")
    assert relative.startswith("..")
    outcome = await ws.call("write", {"file_path": relative, "content": "x"})
    assert text_of(outcome) == denied("workspace-write")
    assert list(outside.iterdir()) == []


async def test_symlink_escape_is_denied_and_inside_link_allowed(ws: Harness, tmp_path: Path, outside: Path) -> None:
    w = tmp_path / "w"
    (w / "link").symlink_to(outside)
    outcome = await ws.call("write", {"file_path": "link/x.txt", "content": "x"})
    assert text_of(outcome) == denied("workspace-write")
    edit = await ws.call("edit", {"file_path": "link/x.txt", "old_string": "a", "new_string": "b"})
    assert text_of(edit) == denied("workspace-write")
    assert list(outside.iterdir()) == []
    (w / "real").mkdir()
    (w / "inner").symlink_to(w / "real")
    assert not (await ws.call("write", {"file_path": "inner/y.txt", "content": "y"})).is_error
    assert (w / "real" / "y.txt").read_text() == "y"


async def test_temp_area_outside_workspace_is_writable(ws: Harness) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="pydsh-scratch-"))
    try:
        outcome = await ws.call("write", {"file_path": str(scratch / "t.txt"), "content": "t"})
        assert not outcome.is_error
        assert (scratch / "t.txt").read_text() == "t"
    finally:
        shutil.rmtree(scratch)


async def test_reads_are_never_fenced(ws: Harness, outside: Path) -> None:
    (outside / "r.txt").write_text("readable\n")
    assert "1: readable" in await ws.text("read", {"file_path": str(outside / "r.txt")})


async def test_directory_swapped_before_the_walk_is_denied(
    ws: Harness, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "w"
    (w / "d").mkdir()
    real_open = files.open_directory

    def swap_then_open(path: str, *, create: bool, nofollow: bool) -> int | None:
        if (w / "d").is_dir() and not (w / "d").is_symlink():
            os.rename(w / "d", w / "aside")
            (w / "d").symlink_to(outside)
        return real_open(path, create=create, nofollow=nofollow)

    monkeypatch.setattr(files, "open_directory", swap_then_open)
    outcome = await ws.call("write", {"file_path": "d/f.txt", "content": "x"})
    assert text_of(outcome) == denied("workspace-write")
    assert list(outside.iterdir()) == []


async def test_directory_swapped_after_the_walk_keeps_the_write_inside(
    ws: Harness, tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = tmp_path / "w"
    (w / "d").mkdir()
    real_load = files.load_at

    def swap_then_load(dir_fd: int, name: str, display: str, verb: str) -> Any:
        os.rename(w / "d", w / "aside")
        (w / "d").symlink_to(outside)
        return real_load(dir_fd, name, display, verb)

    monkeypatch.setattr(files, "load_at", swap_then_load)
    outcome = await ws.call("write", {"file_path": "d/f.txt", "content": "x"})
    assert not outcome.is_error
    assert (w / "aside" / "f.txt").read_text() == "x"
    assert list(outside.iterdir()) == []


async def test_read_only_denies_inside_the_workspace(tmp_path: Path) -> None:
    h = await world(tmp_path, "read-only")
    try:
        outcome = await h.call("write", {"file_path": "inside.txt", "content": "x"})
        assert text_of(outcome) == denied("read-only")
        scratch = tempfile.mkdtemp(prefix="pydsh-scratch-")
        temp = await h.call("write", {"file_path": os.path.join(scratch, "t.txt"), "content": "x"})
        assert text_of(temp) == denied("read-only")
        os.rmdir(scratch)
        assert not (tmp_path / "w" / "inside.txt").exists()
    finally:
        await h.close()


async def test_danger_full_access_writes_anywhere(tmp_path: Path, outside: Path) -> None:
    h = await world(tmp_path, "danger-full-access")
    try:
        assert not (await h.call("write", {"file_path": str(outside / "o.txt"), "content": "o"})).is_error
        assert (outside / "o.txt").read_text() == "o"
    finally:
        await h.close()


AT_FDCWD = -100
RENAME_EXCHANGE = 2
SYSCALLS = {"x86_64": 316, "aarch64": 276}
ITERATIONS = 300
TIME_BOUND_S = 60.0


def exchanger() -> Callable[[bytes, bytes], int] | None:
    """A ``renameat2(RENAME_EXCHANGE)`` caller from libc, else the raw syscall; ``None`` when neither exists."""
    libc = ctypes.CDLL(None, use_errno=True)
    function = getattr(libc, "renameat2", None)
    if function is not None:
        return lambda a, b: int(function(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE))
    number = SYSCALLS.get(platform.machine())
    if number is None:
        return None
    return lambda a, b: int(libc.syscall(number, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE))


def probe(swap: Callable[[bytes, bytes], int], tmp_path: Path) -> bool:
    """Whether the kernel and filesystem support the exchange at all."""
    (tmp_path / "probe-a").mkdir()
    (tmp_path / "probe-b").symlink_to(tmp_path)
    ok = swap(bytes(tmp_path / "probe-a"), bytes(tmp_path / "probe-b")) == 0
    os.unlink(tmp_path / "probe-a")
    os.rmdir(tmp_path / "probe-b")
    return ok


async def test_racing_directory_swap_never_lands_outside(tmp_path: Path, outside: Path) -> None:
    swap = exchanger()
    if swap is None or not probe(swap, tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available on this kernel or libc")
    h = await world(tmp_path, "workspace-write")
    w = tmp_path / "w"
    (w / "d").mkdir()
    (w / "l").symlink_to(outside)
    stop = threading.Event()

    def race() -> None:
        a, b = bytes(w / "d"), bytes(w / "l")
        while not stop.is_set():
            swap(a, b)

    racer = threading.Thread(target=race, daemon=True)
    racer.start()
    written = 0
    errors: set[str] = set()
    deadline = time.monotonic() + TIME_BOUND_S
    try:
        for i in range(ITERATIONS):
            if time.monotonic() > deadline:
                break
            outcome = await h.call("write", {"file_path": f"d/f{i}.txt", "content": f"{i}\n"})
            if outcome.is_error:
                errors.add(text_of(outcome))
            else:
                written += 1
    finally:
        stop.set()
        racer.join()
        await h.close()
    assert list(outside.iterdir()) == []
    assert not [p for p in tmp_path.rglob(".pydsh-*.tmp")]
    assert errors <= {denied("workspace-write")}
    real = w / "d" if (w / "d").is_dir() and not (w / "d").is_symlink() else w / "l"
    assert len(list(real.iterdir())) == written
