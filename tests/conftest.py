"""Shared test fixtures: an isolated ``DSH_HOME``, live invariant companions, and the golden log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydsh.testing.fixtures import Violations, isolated_home, violations

FIXTURES = Path(__file__).parent / "fixtures"
__all__ = ["FIXTURES", "Violations", "golden_rows", "isolated_home", "violations"]


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
