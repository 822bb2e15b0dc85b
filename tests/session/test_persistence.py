"""JSONL persistence: layout, lazy publish, batching, torn tails, corruption, single writer, crashes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pydsh.session.errors import (
    SessionAlreadyExistsError,
    SessionAlreadyOwnedError,
    SessionFormatUnsupportedError,
    SessionPersistenceCorruptionError,
    SessionPersistenceNotFoundError,
    SessionReadOnlyError,
)
from pydsh.session.events import make_header
from pydsh.session.log import Session
from pydsh.session.persistence import jsonl
from pydsh.session.persistence.jsonl import JsonlPersistence, decode_ranges, encode_ranges, project_key
from tests.session.writer_proc import title

ROOT_DIR = Path(__file__).resolve().parents[2]


def turn(seq: int, n: int) -> list[dict[str, object]]:
    return [
        {"type": "turn/start", "seq": seq, "time": 5, "data": {"turn": n}},
        {"type": "turn/end", "seq": seq + 1, "time": 5, "data": {"turn": n, "reason": {"kind": "completed"}}},
    ]


async def stored(tmp_path: Path, events: list[dict[str, object]], sid: str = "s1") -> JsonlPersistence:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header(sid, 1, cwd="/home/u/proj"))
    handle.append(events)
    await handle.close()
    return store


def test_project_key_and_segment_encoding() -> None:
    assert project_key("/home/u/proj") == "--home-u-proj--"
    assert project_key("/") == "--root--"
    assert project_key("/a//b::c\\d") == "--a-b-c-d--"
    assert project_key("/x~y") == "--x~007Ey--"
    assert project_key(None) == "_no-cwd"
    assert jsonl.encode_segment(".") == "~002E"
    assert jsonl.encode_segment("..") == "~002E~002E"
    assert jsonl.encode_segment("a/b~\U0001f600") == "a~002Fb~007E~D83D~DE00"


def test_source_seq_ranges() -> None:
    assert encode_ranges([4, 5, 6, 9]) == [[4, 6], 9]
    assert encode_ranges([4, 5]) == [4, 5]
    assert decode_ranges([[4, 6], 9], 10) == [4, 5, 6, 9]
    with pytest.raises(ValueError, match="range"):
        decode_ranges([[6, 4]], 10)


async def test_nothing_on_disk_before_first_flush_then_atomic_publish(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("s1", 1, cwd="/home/u/proj"))
    handle.append(turn(0, 1))
    assert not any(tmp_path.iterdir())
    await handle.flush()
    directory = tmp_path / "--home-u-proj--" / "s1"
    lines = (directory / "session.v4.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["type"] == "session"
    assert [json.loads(x)["seq"] for x in lines[1:]] == [0, 1]
    assert (directory / "session.lock").exists()
    assert oct(directory.stat().st_mode & 0o777) == "0o700"
    assert oct((directory / "session.v4.jsonl").stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in directory.iterdir() if p.name.endswith(".tmp")] == []
    await handle.close()


async def test_batch_window_drains_without_flush(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("s1", 1))
    handle.append(turn(0, 1))
    path = tmp_path / "_no-cwd" / "s1" / "session.v4.jsonl"
    await asyncio.sleep(jsonl.BATCH_WINDOW_S)
    for _ in range(200):  # the window's own timer writes the batch; a loaded machine may take a while
        if path.exists() and len(path.read_text().splitlines()) == 3:
            break
        await asyncio.sleep(0.05)
    assert len(path.read_text().splitlines()) == 3
    await handle.close()


async def test_reopen_reads_back_and_continues(tmp_path: Path) -> None:
    store = await stored(tmp_path, turn(0, 1))
    handle = await store.open("s1", "write")
    assert [e["seq"] for e in await handle.read()] == [0, 1]
    handle.append(turn(2, 2))
    await handle.close()
    again = await JsonlPersistence(tmp_path).open("s1", "read")
    assert [e["seq"] for e in await again.read()] == [0, 1, 2, 3]
    with pytest.raises(SessionReadOnlyError):
        again.append(turn(4, 3))


async def test_torn_tail_dropped_and_truncated_before_next_append(tmp_path: Path) -> None:
    store = await stored(tmp_path, turn(0, 1))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    with path.open("ab") as fh:
        fh.write(b'{"type":"turn/start","seq":2,"ti')
    handle = await store.open("s1", "write")
    assert len(await handle.read()) == 2
    handle.append(turn(2, 2))
    await handle.flush()
    await handle.close()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(x)["seq"] for x in lines[1:-1]] == [0, 1, 2, 3]


async def test_invalid_line_without_later_turn_end_is_a_torn_tail(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    with path.open("ab") as fh:
        fh.write(b"{not json}\n")
        fh.write(json.dumps(title(3)).encode() + b"\n")
    handle = await JsonlPersistence(tmp_path).open("s1", "read")
    assert len(await handle.read()) == 2


@pytest.mark.parametrize("etype", [["turn/start"], None, {"a": 1}])
async def test_a_large_damaged_line_is_a_torn_tail_like_a_small_one(tmp_path: Path, etype: object) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    with path.open("ab") as fh:
        fh.write(json.dumps({"type": etype, "seq": 2, "time": 5, "data": "x" * 2000}).encode() + b"\n")
    handle = await JsonlPersistence(tmp_path).open("s1", "read")
    assert len(await handle.read()) == 2


async def test_damaged_committed_record_is_corruption(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1) + turn(2, 2))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = b"garbage"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionPersistenceCorruptionError, match="line 3"):
        await JsonlPersistence(tmp_path).open("s1", "read")


async def test_seq_gap_is_corruption(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1) + turn(2, 2))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    lines = path.read_bytes().split(b"\n")
    del lines[1]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionPersistenceCorruptionError):
        await JsonlPersistence(tmp_path).open("s1", "read")


@pytest.mark.parametrize(
    ("version", "needle"),
    [(5, "written by a newer harness — upgrade the harness to open it"), (3, "ships no upgrade path")],
)
async def test_version_gate(tmp_path: Path, version: int, needle: str) -> None:
    await stored(tmp_path, turn(0, 1))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["version"] = version
    header["extra"] = 1
    lines[0] = json.dumps(header).encode()
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionFormatUnsupportedError) as info:
        await JsonlPersistence(tmp_path).open("s1", "read")
    assert f'session "s1" uses log format v{version}' in str(info.value)
    assert needle in str(info.value)


async def test_unknown_type_refuses_the_log(tmp_path: Path) -> None:
    await stored(tmp_path, [{"type": "alien/x", "seq": 0, "time": 1, "data": {}, "ignorable": True}])
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    path.write_bytes(path.read_bytes().replace(b',"ignorable":true', b""))
    with pytest.raises(SessionFormatUnsupportedError, match="alien/x"):
        await JsonlPersistence(tmp_path).open("s1", "read")


async def test_create_existing_and_open_missing(tmp_path: Path) -> None:
    store = await stored(tmp_path, turn(0, 1))
    with pytest.raises(SessionAlreadyExistsError):
        await store.create(make_header("s1", 1))
    with pytest.raises(SessionPersistenceNotFoundError):
        await store.open("nope", "read")


async def test_second_writer_in_process_refused(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1))
    first = await JsonlPersistence(tmp_path).open("s1", "write")
    with pytest.raises(SessionAlreadyOwnedError):
        await JsonlPersistence(tmp_path).open("s1", "write")
    await first.close()
    again = await JsonlPersistence(tmp_path).open("s1", "write")
    await again.close()


async def test_list_reads_headers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    await stored(tmp_path, turn(0, 1), "a")
    store = await stored(tmp_path, turn(0, 1), "b")
    monkeypatch.setattr(jsonl, "parse_log", lambda *a, **k: pytest.fail("listing read a whole log"))
    listed = await store.list()
    assert sorted(x["header"]["id"] for x in listed) == ["a", "b"]
    assert all(x["revision"] > 0 for x in listed)


async def test_zstd_round_trip_and_torn_frame(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1))
    handle.append(turn(0, 1))
    await handle.flush()
    handle.append(turn(2, 2))
    await handle.close()
    path = tmp_path / "_no-cwd" / "z" / "session.v4.jsonl.zstd"
    reopened = await JsonlPersistence(tmp_path, compression="zstd").open("z", "read")
    assert len(await reopened.read()) == 4
    path.write_bytes(path.read_bytes()[:-3])
    writer = await JsonlPersistence(tmp_path, compression="zstd").open("z", "write")
    assert len(await writer.read()) == 2
    writer.append(turn(2, 2))
    await writer.close()
    final = await JsonlPersistence(tmp_path, compression="zstd").open("z", "read")
    assert len(await final.read()) == 4
    header = (await JsonlPersistence(tmp_path, compression="zstd").stat("z"))["header"]
    assert header["id"] == "z"


# -- both encodings, whatever the store writes ---------------------------------------------------

ENCODINGS = {"none": "session.v4.jsonl", "zstd": "session.v4.jsonl.zstd"}


def zstd_frames(data: bytes) -> list[bytes]:
    """The plaintexts of the concatenated zstd frames of ``data`` (each one complete and checksummed)."""
    import zstandard

    frames = []
    while data:
        params = zstandard.get_frame_parameters(data)
        assert params.has_checksum
        reader = zstandard.ZstdDecompressor().decompressobj()
        frames.append(reader.decompress(data))
        data = reader.unused_data
    return frames


@pytest.mark.parametrize("stored_encoding", ["none", "zstd"])
@pytest.mark.parametrize("configured", ["none", "zstd"])
async def test_every_store_reads_and_continues_both_encodings(
    tmp_path: Path, stored_encoding: str, configured: str
) -> None:
    writer = JsonlPersistence(tmp_path, compression=stored_encoding)
    handle = await writer.create(make_header("s1", 1, cwd="/home/u/proj"))
    handle.append(turn(0, 1))
    await handle.close()
    directory = tmp_path / "--home-u-proj--" / "s1"
    path = directory / ENCODINGS[stored_encoding]
    before = path.read_bytes()
    store = JsonlPersistence(tmp_path, compression=configured)
    assert [x["header"]["id"] for x in await store.list()] == ["s1"]
    assert (await store.stat("s1"))["header"]["id"] == "s1"
    resumed = await store.open("s1", "write")
    assert [e["seq"] for e in await resumed.read()] == [0, 1]
    resumed.append(turn(2, 2))
    await resumed.close()
    assert sorted(f.name for f in directory.iterdir()) == sorted([ENCODINGS[stored_encoding], "session.lock"])
    after = path.read_bytes()
    assert after.startswith(before)
    if stored_encoding == "zstd":
        assert [json.loads(line)["seq"] for line in zstd_frames(after[len(before) :])[0].splitlines()] == [2, 3]
    else:
        assert [json.loads(line)["seq"] for line in after[len(before) :].splitlines()] == [2, 3]
    for other in ENCODINGS:
        again = await JsonlPersistence(tmp_path, compression=other).open("s1", "read")
        assert [e["seq"] for e in await again.read()] == [0, 1, 2, 3]


@pytest.mark.parametrize("configured", ["none", "zstd"])
async def test_torn_zstd_frame_is_cut_whatever_the_store_writes(tmp_path: Path, configured: str) -> None:
    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1))
    handle.append(turn(0, 1))
    await handle.close()
    path = tmp_path / "_no-cwd" / "z" / "session.v4.jsonl.zstd"
    intact = path.read_bytes()
    path.write_bytes(intact + zstd_compress(b'{"type":"turn/start","seq":2,"time":5,"data":{"turn":2}}\n')[:-3])
    writer = await JsonlPersistence(tmp_path, compression=configured).open("z", "write")
    assert len(await writer.read()) == 2
    writer.append(turn(2, 2))
    await writer.close()
    data = path.read_bytes()
    assert data.startswith(intact)
    assert len(zstd_frames(data)) == len(zstd_frames(intact)) + 1
    final = await JsonlPersistence(tmp_path, compression=configured).open("z", "read")
    assert [e["seq"] for e in await final.read()] == [0, 1, 2, 3]


def zstd_compress(payload: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor(write_checksum=True).compress(payload)


async def test_a_new_log_is_written_in_the_configured_encoding_one_frame_per_batch(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1))
    handle.append(turn(0, 1))
    await handle.flush()
    handle.append(turn(2, 2))
    await handle.close()
    frames = zstd_frames((tmp_path / "_no-cwd" / "z" / "session.v4.jsonl.zstd").read_bytes())
    assert [frame.count(b"\n") for frame in frames] == [1, 2, 2]
    assert json.loads(frames[0])["type"] == "session"


async def test_small_and_large_batches_are_each_one_checksummed_frame(tmp_path: Path) -> None:
    big = {"title": os.urandom(jsonl.SMALL_BATCH).hex(), "messageSeqs": [], "source": {"kind": "user"}}
    events = [*turn(0, 1), {"type": "session/title", "seq": 2, "time": 5, "data": big}]
    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1))
    handle.append(events[:2])
    await handle.flush()
    handle.append(events[2:])
    await handle.close()
    path = tmp_path / "_no-cwd" / "z" / "session.v4.jsonl.zstd"
    assert [frame.count(b"\n") for frame in zstd_frames(path.read_bytes())] == [1, 2, 1]
    assert await (await JsonlPersistence(tmp_path).open("z", "read")).read() == events


async def test_both_encodings_of_one_session_are_refused(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1))
    directory = tmp_path / "--home-u-proj--" / "s1"
    (directory / ENCODINGS["zstd"]).write_bytes(b"")
    with pytest.raises(
        SessionPersistenceCorruptionError, match=r"both session\.v4\.jsonl and session\.v4\.jsonl\.zstd"
    ):
        await JsonlPersistence(tmp_path, compression="zstd").open("s1", "read")


def test_zstandard_is_imported_only_when_a_zstd_log_is_written_or_read(tmp_path: Path) -> None:
    script = """
import asyncio, sys
from pathlib import Path
from pydsh.session.events import make_header
from pydsh.session.persistence.jsonl import JsonlPersistence

async def main(root):
    store = JsonlPersistence(root, compression="zstd")
    plain = JsonlPersistence(root)
    handle = await plain.create(make_header("p", 1))
    handle.append([{"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}}])
    await handle.close()
    await (await store.open("p", "read")).read()
    print("zstandard" in sys.modules)
    handle = await store.create(make_header("z", 1))
    handle.append([{"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}}])
    await handle.close()
    print("zstandard" in sys.modules)

asyncio.run(main(Path(sys.argv[1])))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT_DIR)}
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.parametrize("profile", ["sdk", "headless", "embed", "web", "acp"])
def test_every_profile_writes_zstd_like_the_reference(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, profile: str
) -> None:
    from pydsh.kernel.profiles import compose_profile

    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    row = next(r for r in compose_profile(profile, []).rows if r.id == "session-persistence-jsonl")
    assert row.config == {"root": "${home:sessions}", "compression": "zstd"}


def test_a_persistence_config_without_compression_writes_zstd_as_the_reference_does() -> None:
    from pydsh.kernel.plugin import resolve_plugin, validate_config

    config = validate_config("p", resolve_plugin("session-persistence-jsonl"), {"root": "/s"})
    assert config.compression == "zstd"


def run_child(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.session.writer_proc", *args],
        cwd=ROOT_DIR,
        stdout=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[arg-type]
    )


async def test_sigkill_mid_batch_keeps_every_flushed_event(tmp_path: Path) -> None:
    child = run_child("writer", str(tmp_path), "crash")
    assert child.stdout is not None
    flushed = 0
    for line in child.stdout:
        flushed = int(line.split()[1])
        if flushed >= 1000:
            break
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    handle = await JsonlPersistence(tmp_path).open("crash", "write")
    events = await handle.read()
    assert len(events) >= flushed
    assert [e["seq"] for e in events] == list(range(len(events)))
    Session(handle.header, events)
    handle.append([title(len(events))])
    await handle.close()
    raw = (tmp_path / "--w--" / "crash" / "session.v4.jsonl").read_bytes()
    assert raw.endswith(b"\n")
    assert all(json.loads(line) for line in raw.split(b"\n")[:-1])


async def test_two_processes_race_for_one_session_exactly_one_wins(tmp_path: Path) -> None:
    await stored(tmp_path, turn(0, 1))
    children = [run_child("hold", str(tmp_path), "s1", "1.5") for _ in range(2)]
    outputs = []
    for child in children:
        assert child.stdout is not None
        outputs.append(child.stdout.readline().strip())
    for child in children:
        child.wait(timeout=10)
    assert sorted(outputs) == ["owner", "refused SessionAlreadyOwnedError"]


async def test_discard_writes_nothing_and_removes_a_log_it_created(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("gone", 1))
    handle.append(turn(0, 1))
    await handle.discard()
    assert not list(tmp_path.rglob("session.v4.jsonl"))
    flushed = await store.create(make_header("gone2", 1))
    flushed.append(turn(0, 1))
    await flushed.flush()
    await flushed.discard()
    assert not await store.exists("gone2")


async def test_cancelled_flush_never_writes_a_batch_twice(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("c", 1))
    await handle.flush()
    for round_ in range(20):
        handle.append(turn(len(await handle.read()) + len(handle._buffer), round_ + 1))
        flush = asyncio.get_running_loop().create_task(handle.flush())
        for _ in range(round_ % 4):
            await asyncio.sleep(0)
        flush.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flush
    await handle.close()
    events = await JsonlPersistence(tmp_path).open("c", "read")
    assert [e["seq"] for e in await events.read()] == list(range(40))


async def test_home_profile_and_session_directories_pydsh_creates_are_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydsh.kernel.compose import dsh_home
    from pydsh.kernel.profiles import ensure_profile
    from pydsh.llm.http import anonymous_user_id

    existing = tmp_path / "existing"
    existing.mkdir(mode=0o755)
    os.chmod(existing, 0o755)
    monkeypatch.setenv("DSH_HOME", str(existing / "home"))
    previous = os.umask(0o022)
    try:
        ensure_profile("headless")
        assert anonymous_user_id()
        handle = await JsonlPersistence(dsh_home() / "sessions").create(make_header("s1", 1, cwd="/home/u/proj"))
        handle.append(turn(0, 1))
        await handle.close()
    finally:
        os.umask(previous)
    home = dsh_home()
    created = [home, home / "profiles", home / "profiles" / "headless", home / "sessions"]
    created += [home / "sessions" / "--home-u-proj--", home / "sessions" / "--home-u-proj--" / "s1"]
    assert {str(p.relative_to(existing)): oct(p.stat().st_mode & 0o777) for p in created} == {
        str(p.relative_to(existing)): "0o700" for p in created
    }
    assert oct(existing.stat().st_mode & 0o777) == "0o755"


async def test_session_lookups_scan_directories_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await stored(tmp_path, turn(0, 1))
    scans_on_loop: list[bool] = []
    real = JsonlPersistence.find

    def spy(self: JsonlPersistence, session_id: str) -> Path | None:
        try:
            asyncio.get_running_loop()
            scans_on_loop.append(True)
        except RuntimeError:
            scans_on_loop.append(False)
        return real(self, session_id)

    monkeypatch.setattr(JsonlPersistence, "find", spy)
    store = JsonlPersistence(tmp_path)
    assert await store.exists("s1")
    await store.stat("s1")
    await (await store.open("s1", "read")).close()
    await (await store.open("s1", "write")).close()
    await (await store.create(make_header("s2", 1))).close()
    assert scans_on_loop
    assert not any(scans_on_loop)


def test_the_persistence_protocol_declares_what_the_loop_and_bash_use() -> None:
    from pydsh.session.persistence.base import SessionHandle, SessionPersistence

    assert {"bind", "handle_of", "exists"} <= set(dir(SessionPersistence))
    assert {"discard", "path"} <= set(dir(SessionHandle))


TOOLS = [{"name": f"tool{n}", "description": "d" * 200, "parameters": {"type": "object"}} for n in range(8)]


def header_turn(seq: int, n: int, reason: str) -> list[dict[str, object]]:
    """A turn whose request logs the same large tool schemas again."""
    data = {"header": {"config": {"provider": "p", "model": "m"}, "tools": TOOLS}, "reason": reason}
    start, end = turn(seq, n)
    return [start, {"type": "request/header", "seq": seq + 1, "time": 5, "data": data}, {**end, "seq": seq + 2}]


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_repeated_large_data_is_read_once_and_shared_frozen(tmp_path: Path, compression: str) -> None:
    events = header_turn(0, 1, "initial") + header_turn(3, 2, "resume") + header_turn(6, 3, "resume")
    store = JsonlPersistence(tmp_path, compression=compression)
    handle = await store.create(make_header("s1", 1, cwd="/home/u/proj"))
    handle.append(events)
    await handle.close()
    read = await (await JsonlPersistence(tmp_path).open("s1", "read")).read()
    assert read == events
    headers = [e["data"] for e in read if e["type"] == "request/header"]
    assert headers[1] is headers[2] and headers[0] is not headers[1]
    with pytest.raises(TypeError, match="immutable"):
        headers[1]["header"]["tools"][0]["name"] = "other"
    assert [e["seq"] for e in read] == list(range(9))


async def test_large_lines_in_any_key_order_read_like_small_ones(tmp_path: Path) -> None:
    big = {"title": "t" * 2000, "messageSeqs": [], "source": {"kind": "user"}}
    rows = [
        {"type": "session/title", "seq": 0, "time": 5, "data": big, "ignorable": True},
        {"data": big, "type": "session/title", "seq": 1, "time": 5},
        {"type": "session/title", "seq": 2, "time": 5, "data": big},
        {"type": "session/title", "seq": 3, "time": 5, "data": big},
    ]
    store = await stored(tmp_path, turn(0, 1))
    path = tmp_path / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)[:1]
    lines += [json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in rows]
    path.write_bytes(b"".join(lines))
    read = await (await store.open("s1", "read")).read()
    assert read == rows
    assert read[2]["data"] is read[3]["data"]


async def test_zstd_listing_decodes_the_header_frame_only(tmp_path: Path) -> None:
    cwd = "/" + os.urandom(6000).hex()
    store = JsonlPersistence(tmp_path, compression="zstd")
    handle = await store.create(make_header("z", 1, cwd=cwd))
    handle.append(turn(0, 1))
    await handle.close()
    [path] = tmp_path.rglob("session.v4.jsonl.zstd")
    assert len(zstd_frames(path.read_bytes())[0]) > 12000
    path.write_bytes(path.read_bytes() + zstd_compress(b"not json\n")[:-2] + b"??")
    [row] = await store.list()
    assert (row["header"]["cwd"], row["revision"]) == (cwd, path.stat().st_size)
    with pytest.raises(SessionPersistenceCorruptionError, match="damaged zstd frame"):
        await store.open("z", "read")
    path.write_bytes(path.read_bytes()[:40])
    assert await store.list() == []
    with pytest.raises(SessionPersistenceCorruptionError, match="no complete header line"):
        await store.stat("z")


def test_batches_of_many_handles_are_compressed_one_at_a_time(tmp_path: Path) -> None:
    import zstandard

    store = JsonlPersistence(tmp_path, compression="zstd")
    payloads = [os.urandom(4000).hex().encode() * (1 + n % 3) for n in range(8)]

    def compress(payload: bytes) -> list[bytes]:
        return [store.frame(payload, True) for _ in range(20)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(compress, payloads))
    for payload, frames in zip(payloads, results, strict=True):
        assert {zstandard.ZstdDecompressor().decompress(frame) for frame in frames} == {payload}


def test_a_large_batch_leaves_no_compressor_workspace_behind(tmp_path: Path) -> None:
    """A compressor keeps the workspace of the largest input it saw: the one the store keeps must only
    ever see small batches, or a 5 MB answer's batch pins 10 MB for the life of the process."""
    import zstandard

    store = JsonlPersistence(tmp_path, compression="zstd")
    large = os.urandom(1000).hex().encode() * 8000
    small = b'{"type":"turn/end"}\n'
    frames = [store.frame(small, True), store.frame(large, True), store.frame(small, True)]
    assert [zstandard.ZstdDecompressor().decompress(f) for f in frames] == [small, large, small]
    kept = store._compressor  # what the store holds on to is the point
    assert kept is not None and kept.memory_size() < 2 * 1024 * 1024


def test_zstd_frames_of_any_size_split_at_their_offsets_and_a_cut_last_frame_is_torn(tmp_path: Path) -> None:
    import zstandard

    compressor = zstandard.ZstdCompressor(write_checksum=True)
    plains = [b'{"a":1}\n', os.urandom(3 * jsonl.FRAME_READ).hex().encode() + b"\n", b'{"b":2}\n{"c":3}\n']
    frames = [compressor.compress(plain) for plain in plains]
    data = b"".join(frames)
    offsets = [0, len(frames[0]), len(frames[0]) + len(frames[1])]
    path = tmp_path / "session.v4.jsonl.zstd"
    assert jsonl._frames(data, path) == (list(zip(offsets, plains, strict=True)), None)
    for cut in (1, len(frames[2]) - 1):
        assert jsonl._frames(data[: offsets[2] + cut], path) == (
            list(zip(offsets[:2], plains[:2], strict=True)),
            offsets[2],
        )
    cut_big = jsonl._frames(data[: offsets[1] + len(frames[1]) // 2], path)
    assert cut_big == ([(0, plains[0])], offsets[1])
