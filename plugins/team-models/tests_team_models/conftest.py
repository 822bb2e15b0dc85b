"""Fixtures of the plugin's tests: an isolated ``DSH_HOME`` and live invariant companions (as pydsh's own tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pydsh.kernel import invariants


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path_factory.mktemp("dsh-home")))
    monkeypatch.setenv("PYDSH_INVARIANTS", "true")
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_PERMISSION_MODE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _violations(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test when an invariant companion saw a violation (spec 01 §9)."""
    report = tmp_path_factory.mktemp("invariants") / "violations.txt"
    monkeypatch.setenv("PYDSH_INVARIANTS_REPORT", str(report))
    invariants.drain()
    yield
    seen = [str(e) for e in invariants.drain()]
    if report.exists():
        seen += report.read_text().splitlines()
    assert not seen, "invariant violations: " + "; ".join(seen)
