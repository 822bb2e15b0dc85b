"""Fixtures of the reminder tests."""

from __future__ import annotations

import pytest

from pydsh.schedules import records


@pytest.fixture(autouse=True)
def numbered_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reminder ids ``schedule-1``, ``schedule-2``… so a script can name them."""
    counter = iter(range(1, 1000))
    monkeypatch.setattr(records, "new_id", lambda: f"schedule-{next(counter)}")
