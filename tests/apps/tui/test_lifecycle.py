"""Quitting, resuming and starting the terminal session: what reaches the log and what the screen shows first."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pydsh.agent.hooks import ASSISTANT_STREAM, AssistantStream
from pydsh.apps.tui import app as screen_module
from pydsh.apps.tui import controller as controller_module
from pydsh.apps.tui.app import PydshTui
from pydsh.apps.tui.controller import Controller
from pydsh.apps.tui.widgets import AnswerView, BlockView
from pydsh.session.keys import SESSION_QUERY
from pydsh.testing.hosts import ScriptedHost
from tests.apps.tui.conftest import Opener


async def test_quitting_with_a_running_turn_stops_it_and_logs_it_aborted(tui: Opener) -> None:
    async with tui([{"hang": True}]) as t:
        await t.send("never ends")
        await t.until(lambda: t.app.running, "the turn to run")
        session_id = t.controller.live.session_id
        await t.pilot.press("ctrl+c")
        await t.until(lambda: not t.app.running, "the first Ctrl+C to stop the turn")
        assert t.app.is_running
        await t.pilot.press("ctrl+c")
        await t.until(lambda: t.app.return_code == 0, "the second Ctrl+C to quit")
        assert t.controller.agent is None
        stored = await t.host.ctx.require(SESSION_QUERY).read(session_id)
        ends = [e["data"]["reason"]["kind"] for e in stored.events if e["type"] == "turn/end"]
        assert ends == ["aborted"]


async def test_quit_stops_a_turn_still_running(tui: Opener) -> None:
    async with tui([{"hang": True}]) as t:
        await t.send("never ends")
        await t.until(lambda: t.app.running, "the turn to run")
        session_id = t.controller.live.session_id
        await t.send("/quit")
        await t.until(lambda: t.app.return_code == 0, "/quit to leave")
        stored = await t.host.ctx.require(SESSION_QUERY).read(session_id)
        assert [e["data"]["reason"]["kind"] for e in stored.events if e["type"] == "turn/end"] == ["aborted"]


def glob_step(count: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "glob", "arguments": {"pattern": f"*{i}.txt"}} for i in range(count)]}


async def test_a_long_session_resumes_showing_its_tail_and_loads_earlier_on_scroll_up(
    isolated_home: Path, tmp_path: Path
) -> None:
    script = [
        glob_step(20),
        glob_step(20),
        {"text": "first answer"},
        glob_step(20),
        glob_step(20),
        {"text": "last answer"},
    ]
    async with ScriptedHost(script, profile="tui", cwd=tmp_path, dsh_home=isolated_home) as host:
        agent = await host.create_agent()
        await agent.run("the first prompt")
        await agent.run("the last prompt")
        session_id = agent.session_id
        await agent.close()
        controller = Controller(host)
        controller.start()
        await controller.open(session_id)
        app = PydshTui(controller)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert len(app.feed.blocks) > screen_module.TAIL
            assert len(app.views) <= screen_module.TAIL
            assert app.feed.blocks[app.first].text == "the last prompt"
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "last answer" in text
            for _ in range(20):
                app.transcript.scroll_home(animate=False)
                await pilot.pause(0.05)
                if app.first == 0:
                    break
            assert app.first == 0
            assert len(app.views) == len(app.feed.blocks)
            app.transcript.scroll_home(animate=False)
            await pilot.pause()
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "› the first prompt" in text
        await controller.shutdown()


async def test_the_screen_is_drawn_before_the_session_opens_and_keeps_what_was_typed(
    isolated_home: Path, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    async with ScriptedHost([{"text": "hello back"}], profile="tui", cwd=tmp_path, dsh_home=isolated_home) as host:
        controller = Controller(host)

        async def opening() -> Controller:
            await gate.wait()
            controller.start()
            await controller.open(None)
            return controller

        app = PydshTui(opening)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "starting…" in text
            assert "Ask anything" in text
            await pilot.press("h", "i")
            await pilot.press("enter")
            await pilot.pause()
            assert controller.agent is None
            gate.set()
            for _ in range(100):
                await pilot.pause(0.05)
                if "hello back" in "\n".join(s.text for s in app.screen._compositor.render_strips()):
                    break
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "› hi" in text
            assert "hello back" in text
        await controller.shutdown()


async def test_a_resumed_session_shows_its_last_turn_before_it_opens_then_the_full_transcript(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--resume``: the last turn read from the log's end is on screen while the full open waits; what is
    typed meanwhile is sent once it is open; the cards shown stay (not drawn again) and earlier ones load."""
    monkeypatch.setattr(controller_module, "PREVIEW_EVENTS", 5)
    script = [glob_step(20), {"text": "first answer"}, glob_step(5), {"text": "last answer"}, {"text": "again"}]
    gate = asyncio.Event()
    async with ScriptedHost(script, profile="tui", cwd=tmp_path, dsh_home=isolated_home) as host:
        agent = await host.create_agent()
        await agent.run("the first prompt")
        await agent.run("the last prompt")
        session_id = agent.session_id
        await agent.close()
        controller = Controller(host)
        controller.start()
        preview = controller.preview(session_id)
        assert preview is not None and preview.session_id == session_id

        async def opening() -> Controller:
            await gate.wait()
            await controller.open(session_id)
            return controller

        app = PydshTui(opening, preview)
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "resuming…" in text
            assert "last answer" in text
            assert [b.text for b in app.feed.blocks if b.kind == "user"] == ["the last prompt"]
            cards = [v for v in app.transcript.children if isinstance(v, BlockView | AnswerView)]
            await pilot.press("h", "i", "enter")
            await pilot.pause()
            assert controller.agent is None
            gate.set()
            for _ in range(100):
                await pilot.pause(0.05)
                if "again" in "\n".join(s.text for s in app.screen._compositor.render_strips()):
                    break
            assert [v for v in app.transcript.children if isinstance(v, BlockView | AnswerView)][: len(cards)] == cards
            assert [b.text for b in app.feed.blocks if b.kind == "user"] == [
                "the first prompt",
                "the last prompt",
                "hi",
            ]
            shown = [view.block.key for view in app.transcript.children if isinstance(view, BlockView | AnswerView)]
            assert shown == [b.key for b in app.feed.blocks[app.first :]]
            assert all(app.views[key].block is app.feed.get(key) for key in shown)
            text = "\n".join(s.text for s in app.screen._compositor.render_strips())
            assert "› hi" in text and "again" in text
        await controller.shutdown()


async def test_no_preview_for_a_session_the_open_refuses(isolated_home: Path, tmp_path: Path) -> None:
    """No preview for an unknown id or a session whose workspace is gone: the open is then made before the
    screen, and refuses it before anything is drawn."""
    workspace = tmp_path / "gone"
    workspace.mkdir()
    async with ScriptedHost([{"text": "hi"}], profile="tui", cwd=workspace, dsh_home=isolated_home) as host:
        agent = await host.create_agent()
        await agent.run("hello")
        await agent.close()
        controller = Controller(host)
        assert controller.preview(agent.session_id) is not None
        assert controller.preview("no-such-session") is None
        workspace.rmdir()
        assert controller.preview(agent.session_id) is None


async def test_a_session_that_cannot_open_ends_the_screen() -> None:
    async def opening() -> None:
        return None

    app = PydshTui(opening)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(40):
            await pilot.pause(0.05)
            if not app.is_running:
                break
    assert app.return_code == 1


async def test_ctrl_c_while_the_session_opens_quits_at_once() -> None:
    never = asyncio.Event()

    async def opening() -> None:
        await never.wait()

    app = PydshTui(opening)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+c")
        for _ in range(40):
            await pilot.pause(0.05)
            if not app.is_running:
                break
    assert app.return_code == 0


async def test_a_run_of_deltas_reaches_the_screen_as_one_in_order(isolated_home: Path, tmp_path: Path) -> None:
    async with ScriptedHost([{"text": "unused"}], profile="tui", cwd=tmp_path, dsh_home=isolated_home) as host:
        controller = Controller(host)
        controller.start()
        agent, other = SimpleNamespace(id="s1"), SimpleNamespace(id="s2")

        def chunk(who: Any, kind: str, text: str) -> None:
            frame = {"type": "chunk", "chunk": {"type": kind, "text": text}}
            host.ctx.emit(ASSISTANT_STREAM, cast(AssistantStream, {"agent": who, "frame": frame}))

        for piece in "abc":
            chunk(agent, "text-delta", piece)
        chunk(agent, "reasoning-delta", "r")
        chunk(agent, "text-delta", "d")
        chunk(other, "text-delta", "x")
        chunk(agent, "text-delta", "e")
        assert controller.drain() == [
            ("delta", ("s1", "text-delta", "abc")),
            ("delta", ("s1", "reasoning-delta", "r")),
            ("delta", ("s1", "text-delta", "d")),
            ("delta", ("s2", "text-delta", "x")),
            ("delta", ("s1", "text-delta", "e")),
        ]
        chunk(agent, "text-delta", "f")
        assert controller.drain() == [("delta", ("s1", "text-delta", "f"))]
        await controller.shutdown()
