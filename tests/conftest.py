"""Shared test fixtures: an isolated ``DSH_HOME`` and the golden log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("dsh-home")
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.setenv("PYDSH_INVARIANTS", "true")
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_PERMISSION_MODE", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


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
