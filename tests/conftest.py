"""Shared test fixtures: an isolated ``DSH_HOME``, live invariant companions, and the golden log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import invariants

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("dsh-home")
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.setenv("PYDSH_INVARIANTS", "true")
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_PERMISSION_MODE", "OPENAI_BASE_URL"):
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
    """Fail the test when a companion saw a violation it did not take (spec 01 §9)."""
    found = Violations(tmp_path_factory.mktemp("invariants") / "violations.txt")
    monkeypatch.setenv("PYDSH_INVARIANTS_REPORT", str(found.report))
    invariants.drain()
    yield found
    left = found.take()
    assert not left, "invariant violations: " + "; ".join(left)


def golden_rows() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The golden fixture as (header, events with seq and time filled in)."""
    lines = (FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    events = []
    for seq, line in enumerate(lines[1:]):
        row = json.loads(line)
        event = {"type": row["type"], "seq": seq, "time": 1790168901572 + seq, "data": row["data"]}
        for key in ("ignorable", "sourceEventSeqs", "surfaceOp"):
            if key in row:
                event[key] = row[key]
        events.append(event)
    return header, events
