"""Cached compositions: reused while every file read is unchanged, recomposed when one changes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import compose, composed_cache
from pydsh.kernel.profiles import compose_profile, ensure_profile, profile_dir

PATCH = '- insert: [{id: extra, name: tool-todo}]\n- {id: llm, config: {marker: "first"}}\n'


def no_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test when anything is parsed (a cache hit reads no YAML)."""

    def refuse(text: str, where: str) -> Any:
        raise AssertionError(f"parsed {where}")

    monkeypatch.setattr(compose, "load_yaml", refuse)


def snapshot(patches: list[str] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    comp = compose_profile("sdk", patches or [])
    return [dataclasses.asdict(r) for r in comp.rows], comp.warnings


def test_an_unchanged_profile_is_served_without_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    first = snapshot()
    no_yaml(monkeypatch)
    assert snapshot() == first


def test_a_changed_patch_file_is_recomposed(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot()
    (profile_dir("sdk") / "patch.yml").write_text(PATCH)
    rows, _ = snapshot()
    assert "extra" in [r["id"] for r in rows]
    assert next(r for r in rows if r["id"] == "llm")["config"] == {"marker": "first"}
    (profile_dir("sdk") / "patch.yml").write_text(PATCH.replace("first", "second"))
    rows, _ = snapshot()
    assert next(r for r in rows if r["id"] == "llm")["config"] == {"marker": "second"}


def test_a_new_home_patch_is_picked_up(isolated_home: Path) -> None:
    snapshot()
    (isolated_home / "patch.yml").write_text("- {id: nowhere, config: {}}\n")
    _, warnings = snapshot()
    assert warnings == [f'{isolated_home / "patch.yml"}: patch targets unknown row "nowhere"; skipped']


def test_a_reference_profile_patch_appearing_later_is_picked_up(isolated_home: Path) -> None:
    snapshot()
    (profile_dir("sdk") / "cordis.patch.yml").write_text("- {id: tool-todo, disabled: true}\n")
    rows, _ = snapshot()
    assert next(r for r in rows if r["id"] == "tool-todo")["disabled"] is True


def test_a_fresh_home_with_the_same_files_reuses_the_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_home: Path
) -> None:
    first = snapshot()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "other-home"))
    no_yaml(monkeypatch)
    assert snapshot() == first


def test_a_result_naming_its_home_is_not_reused_under_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, isolated_home: Path
) -> None:
    (isolated_home / "patch.yml").write_text(PATCH)
    rows, _ = snapshot()
    assert next(r for r in rows if r["id"] == "extra")["source"] == str(isolated_home / "patch.yml")
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "patch.yml").write_text(PATCH)
    monkeypatch.setenv("DSH_HOME", str(other))
    rows, _ = snapshot()
    assert next(r for r in rows if r["id"] == "extra")["source"] == str(other / "patch.yml")


def test_a_relative_patch_is_keyed_by_the_file_it_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, marker in (("a", "from-a"), ("b", "from-b")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "p.yml").write_text(f"- {{id: llm, config: {{marker: {marker}}}}}\n")
    for name, marker in (("a", "from-a"), ("b", "from-b")):
        monkeypatch.chdir(tmp_path / name)
        rows, _ = snapshot(["p.yml"])
        assert next(r for r in rows if r["id"] == "llm")["config"] == {"marker": marker}


@pytest.mark.parametrize("garbage", ["", "{", "[]", '{"request": 1}', '{"rows": [{"id": 1}]}'])
def test_a_corrupt_entry_is_ignored(garbage: str) -> None:
    first = snapshot()
    path = composed_cache.cache_dir() / "profiles" / "sdk.json"
    path.write_text(garbage)
    assert snapshot() == first


def test_an_entry_with_a_forged_row_is_ignored() -> None:
    first = snapshot()
    path = composed_cache.cache_dir() / "profiles" / "sdk.json"
    path.write_text(path.read_text().replace('"children": []', '"children": [], "bogus": 1', 1))
    assert snapshot() == first


def test_values_json_cannot_carry_are_not_cached() -> None:
    ensure_profile("sdk")
    (profile_dir("sdk") / "patch.yml").write_text("- {id: llm, config: {1: one, when: 2024-01-01}}\n")
    rows, _ = snapshot()
    assert next(r for r in rows if r["id"] == "llm")["config"][1] == "one"
    assert not (composed_cache.cache_dir() / "profiles" / "sdk.json").exists()
