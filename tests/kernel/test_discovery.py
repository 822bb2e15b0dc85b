"""The cached ``pydsh.plugins`` table: reused while nothing changes, rebuilt on any installation change."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import discovery


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An extra ``sys.path`` directory for fake distributions, and a private cache directory."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "path", [str(directory), *sys.path])
    yield directory


def install(site: Path, name: str, plugins: dict[str, str]) -> Path:
    """A ``.dist-info`` distribution declaring ``plugins`` as ``pydsh.plugins`` entry points."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in plugins.items())
    (info / "entry_points.txt").write_text(f"[pydsh.plugins]\n{lines}")
    return info


def count_scans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    scans: list[str] = []
    real = importlib.metadata.entry_points

    def counting(**kwargs: Any) -> Any:
        scans.append(kwargs["group"])
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    return scans


def test_the_table_is_read_once_then_served_from_the_cache(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scans = count_scans(monkeypatch)
    first = discovery.plugin_entry_points()
    assert first["session"] == "pydsh.session.log"
    assert discovery.plugin_entry_points() == first
    assert scans == ["pydsh.plugins"]
    assert (discovery.cache_dir() / discovery.CACHE_FILE).is_file()


def test_a_new_distribution_invalidates_the_cache(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scans = count_scans(monkeypatch)
    assert "fake-plugin" not in discovery.plugin_entry_points()
    install(site, "fake_dist", {"fake-plugin": "fake_dist.plugin"})
    assert discovery.plugin_entry_points()["fake-plugin"] == "fake_dist.plugin"
    assert len(scans) == 2


def test_edited_entry_points_invalidate_the_cache(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = install(site, "fake_dist", {"fake-plugin": "fake_dist.plugin"})
    assert discovery.plugin_entry_points()["fake-plugin"] == "fake_dist.plugin"
    (info / "entry_points.txt").write_text("[pydsh.plugins]\nfake-plugin = fake_dist.other_module\n")
    assert discovery.plugin_entry_points()["fake-plugin"] == "fake_dist.other_module"


def test_a_removed_distribution_invalidates_the_cache(site: Path) -> None:
    info = install(site, "fake_dist", {"fake-plugin": "fake_dist.plugin"})
    assert "fake-plugin" in discovery.plugin_entry_points()
    for child in info.iterdir():
        child.unlink()
    info.rmdir()
    assert "fake-plugin" not in discovery.plugin_entry_points()


@pytest.mark.parametrize("garbage", [b"", b"{not json", b"[1, 2]", b'{"key": 1, "table": {"a": 2}}'])
def test_a_corrupt_cache_is_rebuilt(site: Path, garbage: bytes) -> None:
    path = discovery.cache_dir() / discovery.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(garbage)
    assert discovery.plugin_entry_points()["session"] == "pydsh.session.log"
    assert json.loads(path.read_text())["table"]["session"] == "pydsh.session.log"


def test_a_forged_key_with_a_bad_table_is_rebuilt(site: Path) -> None:
    path = discovery.cache_dir() / discovery.CACHE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"key": discovery.installed_key(), "table": {"session": 3}}))
    assert discovery.plugin_entry_points()["session"] == "pydsh.session.log"


def test_an_unwritable_cache_directory_only_costs_the_scan(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert discovery.plugin_entry_points()["session"] == "pydsh.session.log"


def test_another_distribution_finder_bypasses_the_cache(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Finder:
        """A meta-path finder that could list distributions the cache key does not see."""

        def find_spec(self, *args: Any) -> None:
            return None

        def find_distributions(self, *args: Any) -> list[Any]:
            return []

    monkeypatch.setattr(sys, "meta_path", [*sys.meta_path, Finder()])
    scans = count_scans(monkeypatch)
    discovery.plugin_entry_points()
    discovery.plugin_entry_points()
    assert scans == ["pydsh.plugins", "pydsh.plugins"]
    assert not (discovery.cache_dir() / discovery.CACHE_FILE).exists()


def test_a_working_directory_without_distributions_keeps_the_key(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    monkeypatch.chdir(tmp_path / "a")
    key = discovery.installed_key()
    monkeypatch.chdir(tmp_path / "b")
    assert discovery.installed_key() == key
    install(tmp_path / "b", "fake_dist", {"fake-plugin": "fake_dist.plugin"})
    assert discovery.installed_key() != key
