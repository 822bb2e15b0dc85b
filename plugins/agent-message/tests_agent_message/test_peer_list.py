"""``list_peer_agents`` over stored sessions: titles from the session index, no log read (issue: lists at scale)."""

from __future__ import annotations

import pytest

from pydsh.session.persistence.jsonl import JsonlPersistence
from tests_agent_message.world import text, world


async def test_offline_peers_are_listed_with_their_titles_without_reading_their_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with world([[text("a")], [text("b")], [text("c")]]) as w:
        caller = await w.root()
        offline = {}
        for prompt in ("first peer task", "second peer task"):
            agent = await w.root()
            await agent.run(prompt)
            offline[agent.session_id] = prompt
            await agent.close()

        async def no_read(*args: object, **kwargs: object) -> None:
            raise AssertionError("a stored log was read")

        monkeypatch.setattr(JsonlPersistence, "open", no_read)
        rows = (await w.call(caller, "list_peer_agents", {})).meta
        assert {r["id"]: (r["title"], r["status"]) for r in rows if not r["self"]} == {
            sid: (prompt, "offline") for sid, prompt in offline.items()
        }
