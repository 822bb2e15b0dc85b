"""The launcher grammar and bad input: one clear message naming the file and the problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pydsh.apps.cli import UsageError, parse_launch
from pydsh.session.errors import SessionFormatUnsupportedError, SessionPersistenceCorruptionError
from pydsh.session.events import make_header
from pydsh.session.persistence.jsonl import JsonlPersistence

REPO = Path(__file__).resolve().parents[2]


def pydsh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pydsh", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_grammar() -> None:
    launch = parse_launch(["sdk", "--patch", "a.yml", "--patch", "b.yml"])
    assert (launch.profile, launch.patches, launch.app_args) == ("sdk", ["a.yml", "b.yml"], [])
    launch = parse_launch(["headless", "do it", "--json"])
    assert (launch.profile, launch.app_args) == ("headless", ["do it", "--json"])
    launch = parse_launch(["--profile", "web", "--dump-config=resolved"])
    assert (launch.profile, launch.dump) == ("web", "resolved")
    with pytest.raises(UsageError, match="select a profile only once"):
        parse_launch(["--profile", "a", "--profile", "b"])
    with pytest.raises(UsageError, match="--profile needs a name"):
        parse_launch(["--profile", ""])


def test_launcher_errors(tmp_path: Path) -> None:
    assert pydsh(cwd=tmp_path).stderr.strip() == "error: --profile <name> is required"
    version = pydsh("-V", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("pydsh ")
    unknown = pydsh("nonesuch", cwd=tmp_path)
    assert unknown.returncode == 2
    assert 'unknown profile "nonesuch" (known templates: acp, embed, headless, sdk' in unknown.stderr


def test_dump_config_prints_rows_without_secrets(tmp_path: Path) -> None:
    result = pydsh("--profile", "sdk", "--dump-config", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "- id: sdk-server" in result.stdout
    assert "${env:DSH_MAX_TOKENS_AS_SUCCESS:-true}" in result.stdout


def test_malformed_patch_names_the_file_and_exits_2(tmp_path: Path) -> None:
    patch = tmp_path / "broken.yml"
    patch.write_text("- insert: [{id: x, name: y}\n")
    result = pydsh("--profile", "headless", "--patch", str(patch), "--dump-config", cwd=tmp_path)
    assert result.returncode == 2
    assert str(patch) in result.stderr and "malformed YAML" in result.stderr
    assert result.stdout == ""


def test_unknown_plugin_fails_its_row_only(tmp_path: Path) -> None:
    patch = tmp_path / "extra.yml"
    patch.write_text(
        "- insert:\n"
        "    - {id: ghost, name: no-such-plugin}\n"
        "- {id: llm-deepseek, disabled: true}\n"
        "- insert: [{id: llm-replay, name: llm-replay, config: {scripts: [{text: fine}]}}]\n"
    )
    result = pydsh("--profile", "headless", "--patch", str(patch), "hello", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "fine\n"
    assert f'plugin row "ghost" (no-such-plugin) from {patch} failed: KernelError: PLUGIN_NOT_FOUND' in result.stderr


def test_invalid_config_in_a_strict_layer_stops_start_up(tmp_path: Path) -> None:
    patch = tmp_path / "bad-config.yml"
    patch.write_text("- {id: session-title, config: {fallbackMaxWords: many}}\n")
    result = pydsh("--profile", "headless", "--patch", str(patch), "hello", cwd=tmp_path)
    assert result.returncode == 2
    assert 'row "session-title" (session-title): fallbackMaxWords' in result.stderr
    assert result.stdout == ""


def test_invalid_permission_mode_names_the_variable(tmp_path: Path) -> None:
    env_patch = {"DSH_PERMISSION_MODE": "yolo"}
    result = subprocess.run(
        [sys.executable, "-m", "pydsh", "headless", "hello"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), **env_patch},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "DSH_PERMISSION_MODE" in result.stderr


async def test_unknown_event_type_and_truncated_header_name_the_file(tmp_path: Path) -> None:
    store = JsonlPersistence(tmp_path)
    handle = await store.create(make_header("s1", 1))
    handle.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    await handle.close()
    path = next(tmp_path.rglob("session.v4.jsonl"))
    path.write_text(path.read_text().replace("turn/start", "mystery/kind"))
    with pytest.raises(SessionFormatUnsupportedError) as info:
        await JsonlPersistence(tmp_path).open("s1", "read")
    assert str(path) in str(info.value) and "mystery/kind" in str(info.value)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(SessionPersistenceCorruptionError) as corrupt:
        await JsonlPersistence(tmp_path).open("s1", "read")
    assert str(path) in str(corrupt.value)
