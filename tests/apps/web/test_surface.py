"""The web profile's runtime-context snapshot has the golden fixture's six sections, byte for byte (spec 03 §10.2)."""

from __future__ import annotations

import json
from typing import Any

from pydsh.apps.web.surface import source_checkout
from pydsh.session.keys import SESSIONS
from tests.apps.web.conftest import Web
from tests.conftest import FIXTURES


def fixture_snapshot() -> dict[str, Any]:
    """The runtime-context ``user/message`` of the recorded web turn."""
    rows = [json.loads(line) for line in (FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()[1:]]
    [row] = [r for r in rows if r["type"] == "user/message" and r["data"]["source"]["kind"] == "runtime-context"]
    return dict(row["data"])


def placeholders(text: str, values: dict[str, str]) -> str:
    """``text`` with each value JSON-encoded as the sections write it, replaced by its ``{{placeholder}}``."""
    for name, value in values.items():
        text = text.replace(json.dumps(value)[1:-1], f"{{{{{name}}}}}")
    return text


async def test_the_web_snapshot_has_the_fixtures_six_sections_in_order(web: Web) -> None:
    created = await web.new_session("Say hello")
    sid = created["session"]["sessionId"]
    await web.idle(sid)
    events = web.host.ctx.require(SESSIONS).get(sid).events
    [snapshot] = [
        e["data"] for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "runtime-context"
    ]
    source = source_checkout()
    assert source is not None, "the tests run from a checkout"
    values = {"cwd": str(web.workspace), "sourceRoot": source, "webUrl": f"{web.server.base}/"}
    produced = json.loads(placeholders(json.dumps(snapshot), values))
    expected = fixture_snapshot()
    assert [s["name"] for s in produced["source"]["sections"]] == [s["name"] for s in expected["source"]["sections"]]
    assert produced["source"] == expected["source"]
    assert produced["content"] == expected["content"]


async def test_the_url_section_leaves_with_the_server(web: Web) -> None:
    await web.server.stop()
    created_while_stopped = web.server.surface
    assert created_while_stopped is not None and created_while_stopped.url is None
    assert created_while_stopped.url_text(None) is None
