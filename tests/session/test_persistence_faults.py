"""JSONL persistence under faults: damaged lines set aside, unreadable or unwritable logs, failing
writes and fsyncs, a log replaced behind its writer — one clear error, nothing already stored lost."""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pydsh.session.errors import (
    SessionAlreadyOwnedError,
    SessionOwnershipLostError,
    SessionPersistenceIOError,
    SessionReadOnlyError,
)
from pydsh.session.events import make_header
from pydsh.session.persistence import jsonl
from pydsh.session.persistence.jsonl import JsonlPersistence
from tests.session.test_persistence import stored, turn
from tests.session.writer_proc import title

LOG = Path("--home-u-proj--") / "s1" / "session.v4.jsonl"


def titles(start: int, count: int) -> bytes:
    return b"".join(json.dumps(title(seq)).encode() + b"\n" for seq in range(start, start + count))


def refuse_open(monkeypatch: pytest.MonkeyPatch, name: str, code: int, *, writing: bool) -> None:
    """``os.open`` of a file called ``name`` fails with ``code`` when opened for writing (or reading)."""
    real = os.open

    def fake(path: Any, flags: int, *args: Any, **kw: Any) -> int:
        if os.fspath(path).endswith(name) and bool(flags & (os.O_WRONLY | os.O_RDWR)) == writing:
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", fake)


def set_aside_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if ".set-aside-" in p.name)


# -- damaged lines are set aside, never silently dropped (02 §9.5) -----------------------------


async def test_lines_after_a_damaged_line_are_set_aside_before_the_log_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await stored(tmp_path, [*turn(0, 1), {"type": "turn/start", "seq": 2, "time": 5, "data": {"turn": 2}}])
    path = tmp_path / LOG
    kept = path.read_bytes()
    tail = b"{damaged\n" + titles(3, 40) + b'{"type":"sess'
    path.write_bytes(kept + tail)
    with caplog.at_level(logging.WARNING, logger="pydsh.session.persistence"):
        handle = await JsonlPersistence(tmp_path).open("s1", "write")
    assert [e["seq"] for e in await handle.read()] == [0, 1, 2]
    assert path.read_bytes() == kept
    [side] = set_aside_files(path.parent)
    assert side.name.startswith("session.v4.jsonl.set-aside-")
    assert side.read_bytes() == tail
    assert stat.S_IMODE(side.stat().st_mode) == 0o600
    [warning] = [r.getMessage() for r in caplog.records]
    assert str(path) in warning
    assert "line 5 is damaged" in warning
    assert "42 line(s)" in warning
    assert side.name in warning
    handle.append([title(3)])
    await handle.close()
    again = await JsonlPersistence(tmp_path).open("s1", "read")
    assert [e["seq"] for e in await again.read()] == [0, 1, 2, 3]


async def test_a_torn_final_line_alone_is_truncated_without_a_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / LOG
    with path.open("ab") as fh:
        fh.write(b'{"type":"turn/start","seq":2')
    with caplog.at_level(logging.WARNING, logger="pydsh.session.persistence"):
        handle = await JsonlPersistence(tmp_path).open("s1", "write")
        handle.append(turn(2, 2))
        await handle.close()
    assert set_aside_files(path.parent) == []
    assert caplog.records == []


async def test_a_damaged_line_of_a_read_only_open_leaves_the_file_untouched(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / LOG
    with path.open("ab") as fh:
        fh.write(b"{damaged\n" + titles(3, 2))
    before = path.read_bytes()
    handle = await JsonlPersistence(tmp_path).open("s1", "read")
    assert len(await handle.read()) == 2
    assert path.read_bytes() == before
    assert set_aside_files(path.parent) == []


async def test_zstd_damaged_line_sets_its_whole_frame_aside(tmp_path: Path) -> None:
    import zstandard

    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1))
    handle.append(turn(0, 1))
    await handle.close()
    path = tmp_path / "_no-cwd" / "z" / "session.v4.jsonl.zstd"
    kept = path.read_bytes()
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    tail = compressor.compress(titles(2, 1) + b"{damaged\n" + titles(4, 1)) + compressor.compress(titles(5, 3))
    path.write_bytes(kept + tail)
    writer = await JsonlPersistence(tmp_path, compression="zstd").open("z", "write")
    assert [e["seq"] for e in await writer.read()] == [0, 1]
    assert path.read_bytes() == kept
    [side] = set_aside_files(path.parent)
    assert side.read_bytes() == tail
    writer.append([title(2)])
    await writer.close()
    again = await JsonlPersistence(tmp_path, compression="zstd").open("z", "read")
    assert [e["seq"] for e in await again.read()] == [0, 1, 2]


# -- what stands in place of a log -------------------------------------------------------------


@pytest.mark.parametrize(("make", "kind"), [(os.mkfifo, "a FIFO"), (os.mkdir, "a directory")])
async def test_a_fifo_or_directory_in_place_of_the_log_is_refused(
    tmp_path: Path, make: Callable[[Path], None], kind: str
) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / LOG
    path.unlink()
    make(path)
    for access in ("read", "write"):
        with pytest.raises(SessionPersistenceIOError) as info:
            await JsonlPersistence(tmp_path).open("s1", access)  # type: ignore[arg-type]
        assert str(info.value) == f"{path}: is {kind}, not a session log file; refusing to read it"
    assert await JsonlPersistence(tmp_path).list() == []


async def test_an_unreadable_log_is_one_error_naming_file_and_errno(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await stored(tmp_path, turn(0, 1))
    refuse_open(monkeypatch, "session.v4.jsonl", errno.EACCES, writing=False)
    with pytest.raises(SessionPersistenceIOError) as info:
        await JsonlPersistence(tmp_path).open("s1", "read")
    assert str(info.value) == f"{tmp_path / LOG}: opening the session log failed (EACCES: Permission denied)"


@pytest.mark.parametrize(("name", "code"), [("session.v4.jsonl", errno.EROFS), ("session.lock", errno.EACCES)])
async def test_a_log_that_cannot_be_written_is_refused_at_write_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, code: int
) -> None:
    await stored(tmp_path, turn(0, 1))
    refuse_open(monkeypatch, name, code, writing=True)
    with pytest.raises(SessionReadOnlyError, match=f"{name}: .* failed \\({errno.errorcode[code]}: "):
        await JsonlPersistence(tmp_path).open("s1", "write")
    monkeypatch.undo()
    reader = await JsonlPersistence(tmp_path).open("s1", "read")
    assert len(await reader.read()) == 2
    writer = await JsonlPersistence(tmp_path).open("s1", "write")
    await writer.close()


# -- failing writes and fsyncs ------------------------------------------------------------------


class Faults:
    """``os.write`` / ``os.fsync`` / ``os.ftruncate`` on the session log fail with chosen errnos."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.failing: dict[str, int] = {}
        for name in ("write", "fsync", "ftruncate"):
            monkeypatch.setattr(os, name, self._wrap(name, getattr(os, name)))

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(fd: int, *args: Any) -> Any:
            code = self.failing.get(name)
            if code is not None and ".jsonl" in os.readlink(f"/proc/self/fd/{fd}"):
                if name == "write" and len(args[0]) > 1:
                    real(fd, bytes(args[0][: len(args[0]) // 2]))
                raise OSError(code, os.strerror(code))
            return real(fd, *args)

        return call


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("target", ["write", "fsync", "write+ftruncate"])
async def test_a_failed_append_leaves_the_flushed_log_intact_and_a_retry_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, target: str
) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("s1", 1, cwd="/home/u/proj"))
    handle.append(turn(0, 1))
    await handle.flush()
    path = tmp_path / LOG
    flushed = path.read_bytes()
    faults = Faults(monkeypatch)
    faults.failing = dict.fromkeys(target.split("+"), code)
    handle.append(turn(2, 2))
    with pytest.raises(SessionPersistenceIOError) as info:
        await handle.flush()
    assert str(info.value) == (
        f"{path}: appending to the session log failed ({errno.errorcode[code]}: {os.strerror(code)})"
    )
    if "ftruncate" not in target:
        assert path.read_bytes() == flushed
    faults.failing = {}
    await handle.flush()
    await handle.close()
    assert path.read_bytes().startswith(flushed)
    reread = await JsonlPersistence(tmp_path).open("s1", "read")
    assert [e["seq"] for e in await reread.read()] == [0, 1, 2, 3]


@pytest.mark.parametrize("target", ["write", "fsync"])
async def test_a_failed_first_write_leaves_no_log_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    handle = await JsonlPersistence(tmp_path).create(make_header("s1", 1, cwd="/home/u/proj"))
    handle.append(turn(0, 1))
    faults = Faults(monkeypatch)
    faults.failing = {target: errno.ENOSPC}
    with pytest.raises(SessionPersistenceIOError, match=r"creating the session log failed \(ENOSPC: "):
        await handle.flush()
    assert os.listdir(tmp_path / LOG.parent) == ["session.lock"]
    faults.failing = {}
    await handle.close()
    reread = await JsonlPersistence(tmp_path).open("s1", "read")
    assert [e["seq"] for e in await reread.read()] == [0, 1]


# -- ownership ---------------------------------------------------------------------------------


@pytest.mark.parametrize("replace", ["log", "lock"])
async def test_a_log_or_lock_replaced_behind_the_writer_loses_ownership(tmp_path: Path, replace: str) -> None:
    await stored(tmp_path, turn(0, 1))
    handle = await JsonlPersistence(tmp_path).open("s1", "write")
    target = tmp_path / LOG if replace == "log" else tmp_path / LOG.parent / "session.lock"
    copy = target.with_name("copy")
    copy.write_bytes(target.read_bytes())
    os.replace(copy, target)
    before = (tmp_path / LOG).read_bytes()
    handle.append(turn(2, 2))
    with pytest.raises(SessionOwnershipLostError, match=f"^{target} was removed or replaced by another process"):
        await handle.flush()
    assert (tmp_path / LOG).read_bytes() == before
    with pytest.raises(SessionOwnershipLostError):
        await handle.close()


async def test_lock_check_compares_the_device_as_well_as_the_inode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "session.lock"
    real = os.stat

    def other_device(path: Any, *args: Any, **kw: Any) -> os.stat_result:
        result = real(path, *args, **kw)
        if os.fspath(path) != str(lock):
            return result
        fields = list(tuple(result))
        fields[2] += 1
        return os.stat_result(fields)

    monkeypatch.setattr(os, "stat", other_device)
    with pytest.raises(SessionAlreadyOwnedError, match="keeps changing"):
        jsonl.acquire_lock(lock, "s1")
