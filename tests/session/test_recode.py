"""``python -m pydsh.session.persistence.recode``: plain logs become zstd byte for byte, never at a loss."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from pydsh.session.events import make_header
from pydsh.session.persistence.jsonl import SMALL_BATCH, JsonlPersistence
from pydsh.session.persistence.recode import main
from tests.logs import log_text, stored_log
from tests.session.test_persistence import stored, turn

REPO = Path(__file__).resolve().parents[2]


def frames(path: Path) -> list[bytes]:
    """The plaintext of each zstd frame of ``path``, in order."""
    data, out = path.read_bytes(), []
    while data:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out.append(frame.decompress(data))
        data = frame.unused_data
    return out


def turns(count: int, pad: int = 0) -> list[dict[str, object]]:
    """``count`` completed turns, each ``turn/start`` carrying ``pad`` bytes of padding."""
    events: list[dict[str, object]] = []
    for n in range(1, count + 1):
        start, end = turn(len(events), n)
        events += [{**start, "data": {"turn": n, "pad": "x" * pad}}, end]
    return events


async def test_plain_logs_become_zstd_with_the_same_bytes_and_read_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await stored(tmp_path, turns(4, pad=SMALL_BATCH // 3), "s1")
    await stored(tmp_path, turns(1), "s2")
    before = {sid: stored_log(tmp_path, sid).read_bytes() for sid in ("s1", "s2")}
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"2 plain log(s) under {tmp_path} recoded, 0 left as they are"
    for sid, plain in before.items():
        log = stored_log(tmp_path, sid)
        assert log.name == "session.v4.jsonl.zstd"
        assert b"".join(frames(log)) == plain
        assert frames(log)[0] == plain.splitlines(keepends=True)[0]
        assert oct(log.stat().st_mode & 0o777) == "0o600"
        assert sorted(p.name for p in log.parent.iterdir()) == ["session.lock", "session.v4.jsonl.zstd"]
    batches = frames(stored_log(tmp_path, "s1"))[1:]
    assert len(batches) > 1 and all(len(b) <= SMALL_BATCH and b.endswith(b"\n") for b in batches)
    reopened = await JsonlPersistence(tmp_path).open("s1", "write")
    assert [e["seq"] for e in await reopened.read()] == list(range(8))
    reopened.append([{**e, "seq": e["seq"] + 8} for e in turn(0, 5)])
    await reopened.close()
    assert len(await (await JsonlPersistence(tmp_path).open("s1", "read")).read()) == 10


async def test_a_held_torn_or_damaged_log_is_left_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for sid in ("held", "torn", "damaged", "corrupt", "fine"):
        await stored(tmp_path, turns(2), sid)
    torn = stored_log(tmp_path, "torn")
    torn.write_bytes(torn.read_bytes() + b'{"type":"turn/st')
    damaged, corrupt = stored_log(tmp_path, "damaged"), stored_log(tmp_path, "corrupt")
    damaged.write_bytes(b"".join(damaged.read_bytes().splitlines(keepends=True)[:-1]) + b"{damaged\n")
    lines = corrupt.read_bytes().splitlines(keepends=True)
    corrupt.write_bytes(b"".join([lines[0], b"{damaged\n", *lines[2:]]))
    keep = {sid: stored_log(tmp_path, sid).read_bytes() for sid in ("held", "torn", "damaged", "corrupt")}
    holder = await JsonlPersistence(tmp_path).open("held", "write")
    try:
        assert main([str(tmp_path)]) == 1
    finally:
        await holder.close()
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == f"1 plain log(s) under {tmp_path} recoded, 4 left as they are"
    assert stored_log(tmp_path, "fine").name == "session.v4.jsonl.zstd"
    for sid, data in keep.items():
        assert stored_log(tmp_path, sid).read_bytes() == data
    assert f"{stored_log(tmp_path, 'held')}: left as it is: another process holds the session" in err
    assert f"{torn}: left as it is: its last line is unfinished" in err
    assert f"{damaged}: left as it is: line 5 is damaged; resume the session once in pydsh" in err
    assert f"{corrupt}: left as it is: it cannot be read ({corrupt}: line 2 is damaged" in err


async def test_an_interrupted_recode_is_finished_and_a_conflicting_copy_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for sid in ("done", "clash"):
        await stored(tmp_path, turn(0, 1), sid)
    done = stored_log(tmp_path, "done")
    plain = done.read_bytes()
    zstd = JsonlPersistence(tmp_path, compression="zstd")
    done.with_name("session.v4.jsonl.zstd").write_bytes(zstd.frame(plain, True))
    clash = stored_log(tmp_path, "clash")
    clash.with_name("session.v4.jsonl.zstd").write_bytes(zstd.frame(b"other\n", True))
    assert main([str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert not done.exists() and log_text(done.with_name("session.v4.jsonl.zstd")).encode() == plain
    assert clash.exists() and "session.v4.jsonl.zstd exists beside it with other content" in err


async def test_a_dry_run_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await stored(tmp_path, turn(0, 1))
    log = stored_log(tmp_path)
    assert main(["--dry-run", str(tmp_path)]) == 0
    assert (
        capsys.readouterr().out
        == f"{log}: would recode\n1 plain log(s) under {tmp_path} would be recoded, 0 left as they are\n"
    )
    assert stored_log(tmp_path) == log


async def test_the_default_root_is_the_home_s_sessions_and_zstd_logs_are_not_touched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    await stored(home / "sessions", turn(0, 1), "plain")
    store = JsonlPersistence(home / "sessions", compression="zstd")
    handle = await store.create(make_header("z", 1, cwd="/home/u/proj"))
    handle.append(turn(0, 1))
    await handle.close()
    before = stored_log(home, "z").read_bytes()
    env = {**os.environ, "DSH_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pydsh.session.persistence.recode"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"1 plain log(s) under {home / 'sessions'} recoded, 0 left as they are"
    assert stored_log(home, "plain").name == "session.v4.jsonl.zstd"
    assert stored_log(home, "z").read_bytes() == before
