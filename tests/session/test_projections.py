"""The session_projections registry: counted keys, version checks, lazy cells, snapshots, restore."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.session.projections import SessionProjections, Wire
from tests.agent.harness import start_host


@dataclass
class CountUnit:
    """Counts events of one type; the state is a plain int."""

    key: str = "count"
    state_version: int = 1
    etype: str = "turn/start"

    def state_schema(self, raw: object) -> int:
        return int(raw)  # type: ignore[call-overload]

    def init(self, header: dict[str, Any], inherited_event_count: int) -> int:
        return 0

    def apply(self, state: int, event: dict[str, Any]) -> int:
        return state + 1 if event["type"] == self.etype else state

    @property
    def wire(self) -> Wire | None:
        return Wire(view=lambda s: {"n": s}, view_schema=lambda v: v)


async def _host_and_agent(tmp_path: Path) -> tuple[Any, Any, SessionProjections]:
    host = await start_host([{"text": "a"}, {"text": "b"}])
    handle = await host.create(tmp_path)
    return host, handle.agent, host.kernel.ctx.require(SESSION_PROJECTIONS)


async def test_register_counts_registrants_and_rejects_other_versions(tmp_path: Path) -> None:
    host, agent, reg = await _host_and_agent(tmp_path)
    try:
        ctx = host.kernel.ctx
        first = reg.register(ctx, CountUnit())
        second = reg.register(ctx, CountUnit())
        with pytest.raises(
            ValueError,
            match='session projection key "count" is already registered at stateVersion 1; '
            "refusing to share it with stateVersion 2",
        ):
            reg.register(ctx, CountUnit(state_version=2))
        with pytest.raises(
            ValueError, match='session projection "neg" stateVersion must be a non-negative integer, got -1'
        ):
            reg.register(ctx, CountUnit(key="neg", state_version=-1))
        await first()
        assert "count" in reg.registered_keys()
        await second()
        assert "count" not in reg.registered_keys()
        assert reg.state_of(agent.session, "count") is None
    finally:
        await host.close()


async def test_late_unit_folds_the_existing_log_and_tracks_new_events(tmp_path: Path) -> None:
    host, agent, reg = await _host_and_agent(tmp_path)
    try:
        await host.run(agent, "one")
        reg.register(host.kernel.ctx, CountUnit())
        assert reg.state_of(agent.session, "count") == 1
        changes: list[tuple[str, Any]] = []
        reg.on_changed(host.kernel.ctx, lambda s, key, view: changes.append((key, view)))
        await host.run(agent, "two")
        assert reg.state_of(agent.session, "count") == 2
        assert ("count", {"n": 2}) in changes
        assert sum(1 for k, _ in changes if k == "count") == 1
        snap = reg.snapshot(agent.session, ["count"])
        assert snap == {"asOfSeq": agent.session.seq, "values": {"count": {"n": 2}}}
    finally:
        await host.close()


async def test_checkpoint_rows_restore_a_cold_read(tmp_path: Path) -> None:
    host, agent, reg = await _host_and_agent(tmp_path)
    try:
        reg.register(host.kernel.ctx, CountUnit())
        await host.run(agent, "one")
        rows = reg.checkpoint(agent.session)
        mid = len(agent.session.events)
        await host.run(agent, "two")
        events = agent.session.events
        header = agent.session.header
        restored = reg.restore(rows, events[mid:], mid, header, 0)
        assert restored["count"] == 2
        stale = {**rows, "count": {**rows["count"], "ver": 9}}
        assert "count" not in reg.restore(stale, events[mid:], mid, header, 0)
        assert reg.restore(stale, events, 0, header, 0)["count"] == 2
    finally:
        await host.close()
