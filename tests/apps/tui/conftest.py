"""The terminal rig: a scripted ``tui`` profile host, its controller and the screen driven by Textual's pilot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pydsh.apps.tui.app import PydshTui
from pydsh.apps.tui.controller import Controller
from pydsh.testing.hosts import ScriptedHost

SIZE = (100, 30)


@dataclass
class Tui:
    host: ScriptedHost
    controller: Controller
    app: PydshTui
    pilot: Any
    workspace: Path

    def screen(self) -> str:
        """The text on screen now (the top screen, modal or not)."""
        strips = self.app.screen._compositor.render_strips()
        return "\n".join(strip.text for strip in strips)

    async def type(self, text: str) -> None:
        """Type ``text`` into the focused widget key by key."""
        await self.pilot.press(*[KEYS.get(c, c) for c in text])

    async def send(self, text: str, key: str = "enter") -> None:
        await self.type(text)
        await self.pilot.press(key)
        await self.pilot.pause()

    async def until(self, check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
        """Wait until ``check()`` holds, letting the screen tick."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not check():
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")
            await self.pilot.pause(0.05)

    async def shows(self, text: str, timeout: float = 10.0) -> None:
        await self.until(lambda: text in self.screen(), repr(text), timeout)

    async def notified(self, text: str, timeout: float = 10.0) -> None:
        """Wait until a notification carrying ``text`` was raised (toasts are drawn on a layer of their own,
        which the compositor's strips do not include)."""
        await self.until(lambda: any(text in n.message for n in self.app._notifications), repr(text), timeout)

    async def idle(self) -> None:
        await self.controller.live.live.when_idle()
        await self.pilot.pause(0.15)

    def events(self, etype: str) -> list[dict[str, Any]]:
        return [e for e in self.controller.live.events if e["type"] == etype]


KEYS = {" ": "space", "/": "slash", "@": "at", "\n": "ctrl+j", ".": "full_stop", "-": "minus"}

Opener = Callable[..., AbstractAsyncContextManager[Tui]]


@pytest.fixture
def tui(isolated_home: Path, tmp_path: Path) -> Opener:
    """``async with tui(script, patches=[...], size=(w, h), providers=[...]) as t``: the screen of a new session."""

    @asynccontextmanager
    async def open_tui(
        script: list[Any],
        patches: list[Any] | None = None,
        size: tuple[int, int] = SIZE,
        providers: list[dict[str, Any]] | None = None,
    ) -> AsyncIterator[Tui]:
        workspace = tmp_path / "work"
        workspace.mkdir(exist_ok=True)
        (workspace / "hello.txt").write_text("hello world\n")
        host = ScriptedHost(
            script, profile="tui", cwd=workspace, dsh_home=isolated_home, patches=patches or [], providers=providers
        )
        async with host:
            controller = Controller(host)
            controller.start()
            await controller.open(None)
            app = PydshTui(controller)
            try:
                async with app.run_test(size=size) as pilot:
                    yield Tui(host, controller, app, pilot, workspace)
            finally:
                await controller.shutdown()

    return open_tui
