"""Session lists at scale (spec 12 §4): pages of the session index, a paged index-stream hello."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.session.events import make_header
from pydsh.session.keys import SESSION_INDEX
from pydsh.session.log import SessionStore
from pydsh.session.persistence.jsonl import JsonlPersistence
from pydsh.session.query import SessionQuery
from tests.apps.web.conftest import Web


async def stored(home: Path, cwd: Path | str, text: str) -> str:
    """A stored root session with one prompt, written by a store the server's index does not follow."""
    session = SessionStore(Kernel().ctx).new(make_header(f"s-{text}", 1, cwd=str(cwd)))
    handle = await JsonlPersistence(home / "sessions").create(session.header)
    session.publish = lambda s, e: handle.append([e])
    session.append("turn/start", {"turn": 1})
    session.append(
        "user/message",
        {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": text},
        surface_op="append",
    )
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    await handle.close()
    return session.id


async def hello(web: Web) -> dict[str, Any]:
    """The first frame of the index stream."""
    async with web.client.stream("GET", "/api/events") as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                value: dict[str, Any] = json.loads(line[5:])
                return value
    raise AssertionError("no hello")


def newest_first(rows: list[dict[str, Any]]) -> bool:
    keys = [(-r["updatedAt"], r["sessionId"]) for r in rows]
    return keys == sorted(keys)


async def test_the_index_stream_hello_carries_the_first_page_and_a_cursor(web: Web, isolated_home: Path) -> None:
    ids = {await stored(isolated_home, web.workspace, f"task {n:02d}") for n in range(55)}
    first = await hello(web)
    assert len(first["sessions"]) == 50 and newest_first(first["sessions"])
    assert first["workspaces"][0]["path"] == str(web.workspace) and first["workspaces"][0]["sessionCount"] == 55
    rest = (await web.client.get("/api/sessions", params={"cursor": first["nextCursor"]})).json()
    assert "nextCursor" not in rest and len(rest["sessions"]) == 5
    rows = first["sessions"] + rest["sessions"]
    assert {r["sessionId"] for r in rows} == ids and newest_first(rows)
    assert {r["title"] for r in rows} == {f"task {n:02d}" for n in range(55)}


async def test_every_workspace_opens_with_its_newest_five(web: Web, isolated_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    older = [await stored(isolated_home, other, f"older {n}") for n in range(7)]
    for n in range(55):
        await stored(isolated_home, web.workspace, f"newer {n:02d}")
    first = await hello(web)
    there = [r["sessionId"] for r in first["sessions"] if r["cwd"] == str(other)]
    every = (await web.client.get("/api/sessions", params={"workspace": str(other)})).json()["sessions"]
    assert {r["sessionId"] for r in every} == set(older)
    assert len(first["sessions"]) == 55 and there == [r["sessionId"] for r in every][:5]
    assert {w["path"]: w["sessionCount"] for w in first["workspaces"]} == {str(web.workspace): 55, str(other): 7}


async def test_pages_hold_still_while_new_sessions_arrive(web: Web, isolated_home: Path) -> None:
    ids = [await stored(isolated_home, web.workspace, f"older {n}") for n in range(5)]
    seen: list[str] = []
    page = (await web.client.get("/api/sessions", params={"limit": 2})).json()
    seen += [r["sessionId"] for r in page["sessions"]]
    await stored(isolated_home, web.workspace, "newer")
    while "nextCursor" in page:
        page = (await web.client.get("/api/sessions", params={"limit": 2, "cursor": page["nextCursor"]})).json()
        seen += [r["sessionId"] for r in page["sessions"]]
    assert sorted(seen) == sorted(ids)


async def test_the_first_pages_of_indexed_sessions_read_no_log(
    web: Web, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    here = [await stored(isolated_home, web.workspace, f"here {n}") for n in range(3)]
    there = await stored(isolated_home, other, "over there")
    await web.host.ctx.require(SESSION_INDEX).settled()

    async def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a stored log was read")

    monkeypatch.setattr(SessionQuery, "read", no_read)
    monkeypatch.setattr(JsonlPersistence, "open", no_read)
    workspace = next(w for w in (await hello(web))["workspaces"] if w["path"] == str(other))
    assert workspace["sessionCount"] == 1
    page = (await web.client.get("/api/sessions", params={"workspace": workspace["workspaceId"]})).json()
    assert [(r["sessionId"], r["title"], r["status"]) for r in page["sessions"]] == [(there, "over there", "offline")]
    page = (await web.client.get("/api/sessions", params={"q": "HERE 1"})).json()
    assert [r["sessionId"] for r in page["sessions"]] == [here[1]]
    assert page["sessions"][0]["stats"] == {"turns": 1, "steps": 0, "tokens": 0}
