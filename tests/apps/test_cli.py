"""The launcher grammar and bad input: one clear message naming the file and the problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pydsh.apps.cli import DUMPS_EXCLUSIVE, EVENTS_EXCLUSIVE, parse_launch
from pydsh.apps.usage import UsageError
from pydsh.session.errors import SessionFormatUnsupportedError, SessionPersistenceCorruptionError
from pydsh.session.events import make_header
from pydsh.session.persistence.jsonl import JsonlPersistence
from tests.sdk.reference import REFERENCE, needs_reference

REPO = Path(__file__).resolve().parents[2]
NO_PATCH = "error: --dump-default-config prints the bundle layers and takes no --patch"


def pydsh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pydsh", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_grammar() -> None:
    launch = parse_launch(["sdk", "--patch", "a.yml", "--patch=b.yml"])
    assert (launch.profile, launch.patches, launch.app_args) == ("sdk", ["a.yml", "b.yml"], [])
    launch = parse_launch(["headless", "do it", "--json"])
    assert (launch.profile, launch.app_args) == ("headless", ["do it", "--json"])
    launch = parse_launch(["--profile", "web", "--dump-config=resolved"])
    assert (launch.profile, launch.dump) == ("web", "resolved")
    launch = parse_launch(["rescue", "--from-default-profile", "web", "--dump-default-config"])
    assert (launch.profile, launch.from_default, launch.dump) == ("rescue", "web", "default")
    assert parse_launch(["--profile=sdk", "--dump-config-schema"]).dump == "schema"
    with pytest.raises(UsageError, match="select a profile only once"):
        parse_launch(["--profile", "a", "--profile", "b"])
    with pytest.raises(UsageError, match="--profile needs a name"):
        parse_launch(["--profile", ""])
    with pytest.raises(UsageError, match='--dump-config takes only the value resolved, got "yaml"'):
        parse_launch(["sdk", "--dump-config=yaml"])


def test_bare_pydsh_prints_the_usage_and_exits_2(tmp_path: Path) -> None:
    bare = pydsh(cwd=tmp_path)
    assert (bare.returncode, bare.stdout) == (2, "")
    assert bare.stderr.startswith("Usage: pydsh [--profile] <name>")
    assert "--dump-config-schema" in bare.stderr


def test_launcher_errors(tmp_path: Path) -> None:
    assert pydsh("--patch", "x.yml", cwd=tmp_path).stderr.strip() == "error: --profile <name> is required"
    version = pydsh("-V", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("pydsh ")
    unknown = pydsh("nonesuch", cwd=tmp_path)
    assert unknown.returncode == 2
    assert (
        'unknown profile "nonesuch" (known templates: acp, embed, headless, sdk, sdk-minimal, tui, web)'
        in unknown.stderr
    )


LAUNCHER_ERRORS = [
    (("sdk", "--dump-events", "--dump-config"), f"error: {EVENTS_EXCLUSIVE}"),
    (("--x",), "error: unknown option '--x'"),
    (("--patch", "p.yml", "-q", "sdk"), "error: unknown option '-q'"),
    (("--profile", "sdk", "--dump-config", "--dump-default-config"), f"error: {DUMPS_EXCLUSIVE}"),
    (("sdk", "--dump-config-schema", "--dump-config"), f"error: {DUMPS_EXCLUSIVE}"),
    (("--profile", "sdk", "--patch", "p.yml", "--dump-default-config"), NO_PATCH),
    (("--profile", "sdk", "--dump-config", "extra"), 'error: config dumps take no app arguments, got "extra"'),
    (("sdk", "--from-default-profile="), "error: --from-default-profile needs a name"),
]
"""Bad launcher input: one line, exit 1. From the fourth on, the reference says the same (it has no
``--dump-events``, and its bare ``--x`` asks for a profile)."""


@pytest.mark.parametrize(("args", "line"), LAUNCHER_ERRORS)
def test_bad_launcher_input_is_one_line_naming_it(tmp_path: Path, args: tuple[str, ...], line: str) -> None:
    (tmp_path / "p.yml").write_text("[]\n")
    result = pydsh(*args, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line + "\n")


@needs_reference
@pytest.mark.parametrize(("args", "line"), LAUNCHER_ERRORS[3:])
def test_the_reference_words_bad_launcher_input_alike(tmp_path: Path, args: tuple[str, ...], line: str) -> None:
    (tmp_path / "p.yml").write_text("[]\n")
    result = subprocess.run([REFERENCE, *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", line + "\n")


def test_dump_default_config_leaves_out_the_user_layers(tmp_path: Path, isolated_home: Path) -> None:
    assert pydsh("sdk", "--dump-config", cwd=tmp_path).returncode == 0
    (isolated_home / "profiles" / "sdk" / "patch.yml").write_text("- {id: tool-todo, disabled: true}\n")
    (isolated_home / "patch.yml").write_text("- {id: tool-web, disabled: true}\n")
    written = yaml.safe_load(pydsh("sdk", "--dump-config", cwd=tmp_path).stdout)
    default = pydsh("sdk", "--dump-default-config", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    rows = {row["id"]: row for row in yaml.safe_load(default.stdout)}
    assert "disabled" not in rows["tool-todo"] and "disabled" not in rows["tool-web"]
    assert [row["id"] for row in written] == list(rows)
    assert {row["id"] for row in written if row.get("disabled") is True} - {
        i for i, row in rows.items() if row.get("disabled") is True
    } == {"tool-todo", "tool-web"}


def test_from_default_profile_recreates_the_profile_and_keeps_the_old_files(
    tmp_path: Path, isolated_home: Path
) -> None:
    profile = isolated_home / "profiles" / "rescue"
    first = pydsh("rescue", "--from-default-profile", "sdk", "--dump-config", cwd=tmp_path)
    assert (first.returncode, first.stderr) == (0, "")
    assert "- id: sdk-server" in first.stdout
    (profile / "patch.yml").write_text("- {id: tool-todo, disabled: true}\n")
    again = pydsh("--profile", "rescue", "--from-default-profile=headless", "--dump-config", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "- id: headless-app" in again.stdout and "sdk-server" not in again.stdout
    assert again.stderr == (
        'pydsh: profile "rescue" recreated from template "headless"; kept the old profile.yml.bak and patch.yml.bak\n'
    )
    assert yaml.safe_load((profile / "profile.yml").read_text())["bundles"] == ["base", "agent-tools", "headless-app"]
    assert (profile / "patch.yml").read_text() == "[]\n"
    assert (profile / "patch.yml.bak").read_text() == "- {id: tool-todo, disabled: true}\n"
    unknown = pydsh("rescue", "--from-default-profile", "nonesuch", cwd=tmp_path)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr.startswith('error: unknown default profile "nonesuch" (known templates: acp, embed,')


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
