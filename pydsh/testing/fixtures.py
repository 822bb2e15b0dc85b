"""pytest fixtures for tests of pydsh, its plugins and programs that embed it.

Import them into a ``conftest.py`` (``from pydsh.testing.fixtures import isolated_home, violations``):
every test then gets its own ``DSH_HOME`` with no provider keys in the environment, and fails when
an invariant companion saw a violation it did not take, in its own process or in a child it started
(spec 01 §9).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pydsh.kernel import invariants

CLEARED = ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_PERMISSION_MODE", "OPENAI_BASE_URL")
"""Variables a developer's shell may set that would send tests to a real provider or change their mode."""


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh ``DSH_HOME`` with invariant companions on and no provider settings inherited.

    Caches go to a fresh directory too, not the user's ``~/.cache``.
    """
    home = tmp_path_factory.mktemp("dsh-home")
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PYDSH_INVARIANTS", "true")
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    return home


class Violations:
    """Invariant violations seen during one test: in this process and in the report its children write."""

    def __init__(self, report: Path) -> None:
        self.report = report

    def take(self) -> list[str]:
        """Every violation seen since the last call (each once), oldest first; forgets them."""
        seen = [str(e) for e in invariants.drain()]
        if self.report.exists():
            seen += [line for line in self.report.read_text().splitlines() if line not in seen]
            self.report.unlink()
        return seen


@pytest.fixture(autouse=True)
def violations(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Violations]:
    """Fail the test when a companion saw a violation it did not take."""
    found = Violations(tmp_path_factory.mktemp("invariants") / "violations.txt")
    monkeypatch.setenv("PYDSH_INVARIANTS_REPORT", str(found.report))
    invariants.drain()
    yield found
    left = found.take()
    assert not left, "invariant violations: " + "; ".join(left)
