"""Secrets stay out of tool results: the harness's process files, pydsh's credentials, the deny-list, the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pydsh.tools.protected import Protection
from tests.tools.harness import FS, POLICY, Harness, harness, text_of

ROOT = Path(__file__).resolve().parents[2]
ROWS = [*FS, ("tool-fs-search", None), ("tool-str-replace-editor", None), *POLICY[:2]]
PROCESS = "a file of the harness's own process, never readable by tools"


async def world(workspace: Path, mode: str) -> Harness:
    return await harness(workspace, [*ROWS, ("permission", {"mode": mode})], startup=True)


def refusal(outcome: Any) -> tuple[str, str | None]:
    assert outcome.is_error
    return text_of(outcome), (outcome.error or {}).get("code")


def test_no_tool_result_in_any_mode_contains_the_api_key(tmp_path: Path) -> None:
    marker = "pydsh-test-key-4b1d9e"
    env = {k: v for k, v in os.environ.items() if "DEEPSEEK" not in k}
    env.update(DEEPSEEK_API_KEY=marker, DSH_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    (tmp_path / "w").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tests.tools.secret_probe", str(tmp_path / "w")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    results = json.loads(done.stdout)
    assert [r for r in results if marker in r["text"]] == []
    refused = [r for r in results if "bash" not in r["tool"]]
    assert all(PROCESS in r["text"] for r in refused)
    parent = [
        r
        for r in results
        if r["mode"] == "danger-full-access" and r["args"].get("command", "").endswith("$PPID/environ")
    ]
    assert "DEEPSEEK_API_KEY=" in parent[0]["text"]


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "danger-full-access"])
async def test_own_process_files_are_refused(tmp_path: Path, mode: str) -> None:
    h = await world(tmp_path, mode)
    try:
        for path in (f"/proc/{os.getpid()}/environ", "/proc/self/cmdline", "/proc/thread-self/environ"):
            outcome = await h.call("read", {"file_path": path})
            assert refusal(outcome) == (f'Error: cannot read "{path}": {PROCESS}', "FS_PROTECTED_PATH")
        grep = await h.call("grep", {"pattern": "PATH", "path": "/proc/self"})
        assert refusal(grep) == (f'Error: cannot read "/proc/self": {PROCESS}', "FS_PROTECTED_PATH")
        view = await h.call("str_replace_editor", {"command": "view", "path": "/proc/self/environ"})
        assert refusal(view) == (f'Error: cannot view "/proc/self/environ": {PROCESS}', "FS_PROTECTED_PATH")
    finally:
        await h.close()


def test_a_search_walking_into_proc_skips_the_harness_only() -> None:
    refused = Protection(None).within("/proc")
    assert refused(f"/proc/{os.getpid()}/environ")
    assert refused(f"/proc/{os.getpid()}")
    assert not refused("/proc/cpuinfo")


def test_threads_of_the_harness_count_as_its_process() -> None:
    started, stop = threading.Event(), threading.Event()
    tids: list[int] = []

    def worker() -> None:
        tids.append(threading.get_native_id())
        started.set()
        stop.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        started.wait()
        assert tids[0] != os.getpid()
        assert Protection(None).reason(f"/proc/{tids[0]}/environ") == PROCESS
        assert Protection(None).reason("/proc/1/environ") is None or os.getpid() == 1
    finally:
        stop.set()
        thread.join()


async def test_credential_file_is_refused_even_unconfined(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "dsh"
    home.mkdir()
    (home / "credentials.json").write_text('{"deepseek": "stored-key"}')
    monkeypatch.setenv("DSH_HOME", str(home))
    (tmp_path / "w").mkdir()
    h = await world(tmp_path / "w", "danger-full-access")
    try:
        path = home / "credentials.json"
        outcome = await h.call("read", {"file_path": str(path)})
        reason = "pydsh's credential file, never readable by tools"
        assert refusal(outcome) == (f'Error: cannot read "{path}": {reason}', "FS_PROTECTED_PATH")
        assert "stored-key" not in text_of(await h.call("grep", {"pattern": "stored", "path": str(home)}))
    finally:
        await h.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory holding well-known secret files."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".aws").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("private-secret\n")
    (home / ".ssh" / "id_ed25519.pub").write_text("public-key\n")
    (home / ".aws" / "credentials").write_text("aws-secret\n")
    (home / ".aws" / "notes.txt").write_text("aws-notes\n")
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "w").mkdir()
    return home


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
@pytest.mark.parametrize("ripgrep", [True, False])
async def test_deny_list_applies_in_confined_modes(
    tmp_path: Path, home: Path, mode: str, ripgrep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not ripgrep:
        monkeypatch.setattr("pydsh.tools.search.shutil.which", lambda name: None)
    h = await world(tmp_path / "w", mode)
    try:
        reason = f"a well-known secret location, not readable under {mode} mode"
        for path in (home / ".ssh" / "id_ed25519", home / ".aws" / "credentials"):
            outcome = await h.call("read", {"file_path": str(path)})
            assert refusal(outcome) == (f'Error: cannot read "{path}": {reason}', "FS_PROTECTED_PATH")
        assert "1: public-key" in await h.text("read", {"file_path": str(home / ".ssh" / "id_ed25519.pub")})
        found = await h.text("grep", {"pattern": "aws-", "path": str(home / ".aws")})
        assert "aws-notes" in found
        assert "aws-secret" not in found
    finally:
        await h.close()


async def test_deny_list_does_not_apply_unconfined(tmp_path: Path, home: Path) -> None:
    h = await world(tmp_path / "w", "danger-full-access")
    try:
        assert "1: private-secret" in await h.text("read", {"file_path": str(home / ".ssh" / "id_ed25519")})
        assert "aws-secret" in await h.text("grep", {"pattern": "aws-", "path": str(home / ".aws")})
    finally:
        await h.close()
