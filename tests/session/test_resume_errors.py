"""A log that cannot be used, seen from the apps: one line naming the file and the problem (headless
exit 1, SDK -32603), refused at resume time before any model call; a damaged line is set aside with
one warning; a log that cannot be written mid-run ends headless with that line, not a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pydsh.host import Host
from pydsh.host.keys import APP
from pydsh.kernel.compose import resolve_rows
from pydsh.session.errors import SessionReadOnlyError
from pydsh.testing import scripted_patch
from tests.agent.harness import compose, start_host
from tests.apps.test_headless import patch_file, run
from tests.logs import PLAIN_LOGS_YAML, stored_log
from tests.sdk.conftest import Raw, error_of
from tests.session.test_persistence import stored, turn
from tests.session.test_persistence_faults import Faults, refuse_open, set_aside_files


def log_of(session_id: str) -> Path:
    return stored_log(Path(os.environ["DSH_HOME"]) / "sessions", session_id)


def test_headless_resume_of_a_directory_in_place_of_the_log_is_one_line_exit_one(tmp_path: Path) -> None:
    patch = patch_file(tmp_path, [{"text": "first"}, {"text": "second"}])
    first = run("--profile", "headless", "--patch", str(patch), "go", "--session", "s1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    path = log_of("s1")
    path.unlink()
    path.mkdir()
    result = run("--profile", "headless", "--patch", str(patch), "again", "--resume", "s1", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"pydsh: {path}: is a directory, not a session log file; refusing to read it\n"


def test_headless_resume_sets_damaged_lines_aside_with_one_warning(tmp_path: Path) -> None:
    (Path(os.environ["DSH_HOME"]) / "patch.yml").write_text(PLAIN_LOGS_YAML)
    patch = patch_file(tmp_path, [{"text": "first"}, {"text": "second"}])
    first = run("--profile", "headless", "--patch", str(patch), "go", "--session", "s1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    path = log_of("s1")
    lines = path.read_bytes().splitlines(keepends=True)
    end = max(i for i, line in enumerate(lines) if b'"turn/end"' in line)
    damaged = len(lines) - 3
    tail = b"{damaged\n" + b"".join(lines[damaged + 1 : end]) + b"".join(lines[end + 1 :])
    path.write_bytes(b"".join(lines[:damaged]) + tail)
    result = run("--profile", "headless", "--patch", str(patch), "again", "--resume", "s1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1
    assert f"{path}: line {damaged + 1} is damaged" in warnings[0]
    assert f"{len(tail.splitlines())} line(s)" in warnings[0]
    [side] = set_aside_files(path.parent)
    assert side.read_bytes() == tail


async def test_sdk_resume_of_a_fifo_in_place_of_the_log_answers_the_one_line_message(tmp_path: Path) -> None:
    root = Path(os.environ["DSH_HOME"]) / "sessions"
    await stored(root, turn(0, 1))
    path = root / "--home-u-proj--" / "s1" / "session.v4.jsonl"
    path.unlink()
    os.mkfifo(path)
    peer = Raw(tmp_path)
    try:
        assert "result" in peer.initialize()
        answer = peer.request(2, "session/resume", {"sessionId": "s1"})
        assert error_of(answer) == f"{path}: is a FIFO, not a session log file; refusing to read it"
    finally:
        peer.stop()


async def test_resume_of_a_log_that_cannot_be_written_fails_before_any_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = await start_host([{"text": "first"}])
    try:
        handle = await host.create(tmp_path)
        await host.run(handle.agent, "go")
        session_id = handle.agent.id
        await handle.dispose()
        path = log_of(session_id)
        refuse_open(monkeypatch, path.name, errno.EROFS, writing=True)
        with pytest.raises(SessionReadOnlyError) as info:
            await host.agents.resume(session_id)
        assert str(info.value) == (
            f"{path}: opening the session log for appending failed (EROFS: Read-only file system)"
        )
        assert host.agents.get(session_id) is None
    finally:
        await host.close()


async def test_headless_run_whose_log_cannot_be_written_ends_with_one_line_exit_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    comp = compose(["base", "agent-tools", "headless-app"], [scripted_patch([{"text": "never"}])])
    host = await Host.of_rows("headless", resolve_rows(comp.rows)).start(service=APP)
    try:
        Faults(monkeypatch).failing = {"fsync": errno.ENOSPC}
        code = await host.ctx.require(APP).run(host, ["go", "--session", "s1", "--cwd", str(tmp_path)])
    finally:
        monkeypatch.undo()
        await host.close()
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "creating the session log failed (ENOSPC: No space left on device)" in err.splitlines()[-1]
