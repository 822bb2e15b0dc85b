"""The ``tui-app`` plugin: ``pydsh tui`` (and a bare ``pydsh`` in a terminal) is an interactive session.

This module stays light: Textual is imported by :meth:`TuiApp.run` only, so no other profile's start
path pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING

from pydsh.agent.keys import AGENTS
from pydsh.apps.tui.options import TuiOptions, parse_options
from pydsh.apps.usage import LaunchFailed, parsed
from pydsh.host.errors import HostError
from pydsh.host.keys import APP
from pydsh.kernel.context import Context
from pydsh.session.keys import SESSIONS

if TYPE_CHECKING:
    from textual.app import App

    from pydsh.apps.tui.controller import Controller, Preview
    from pydsh.host import Host
    from pydsh.kernel.compose import Row

INSTALL = "pydsh: the terminal UI needs the textual package: pip install textual (or reinstall pydsh)"
HANG_UPS = (signal.SIGHUP, signal.SIGTERM)
USAGE_REFUSALS = frozenset({"not_found", "member_session", "bad_workspace", "bad_session_id", "owned_elsewhere"})
"""Refusals of ``--resume`` and ``--cwd``: exit 2 like a usage error."""


def textual_missing() -> bool:
    """Whether Textual cannot be imported (checked without importing it)."""
    return importlib.util.find_spec("textual") is None


def usable_options(args: list[str]) -> TuiOptions | int:
    """The options, or the exit code after a usage error or without Textual (each said on stderr)."""
    options = parsed(parse_options, args)
    if isinstance(options, int):
        return options
    if textual_missing():
        print(INSTALL, file=sys.stderr)
        return 2
    return options


class TuiApp:
    """The ``app`` service of the ``tui`` profile."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def run(self, host: Host, args: list[str]) -> int:
        options = usable_options(args)
        if isinstance(options, int):
            return options

        async def loaded() -> Host:
            return host

        return await run_tui(loaded, options)


def launch(profile: str, composed: Callable[[], list[Row]], args: list[str]) -> int:
    """``pydsh tui`` from the command line. For a new session the screen is drawn first and the profile is
    composed (``composed`` gives its rows or raises :class:`LaunchFailed`) and its host loaded behind it, so
    the prompt shows before the plugins are imported; ``--resume`` loads the host first (a wrong id is refused
    before any screen) and draws the session's last turn from the end of its log while the full open runs
    behind the first frame."""
    options = usable_options(args)
    if isinstance(options, int):
        return options
    from pydsh.host.launch import app_runtime, configure_logging, load_host

    configure_logging()
    loading: list[Host] = []

    async def loaded() -> Host:
        loading.append(await load_host(profile, composed()))
        return loading[0]

    async def run() -> int:
        try:
            with app_runtime(lambda: all(host.idle for host in loading)):
                return await run_tui(loaded, options, paint_first=options.resume is None)
        finally:
            for host in loading:
                await host.close()

    return asyncio.run(run())


async def run_tui(loaded: Callable[[], Awaitable[Host]], options: TuiOptions, *, paint_first: bool = False) -> int:
    """Run the screen until the user quits, then stop what still runs. ``paint_first``: the session opens
    behind the first frame (once ``loaded`` gives the host) rather than before it; so does a resumed session
    whose last turn could be read from its log's end (drawn first). A session that cannot be opened ends the
    run with its one-line error."""
    opening = Opening(loaded, options)
    code: int | None = 1
    try:
        preview = await opening.preview() if options.resume is not None else None
        behind = paint_first or preview is not None
        session = None if opening.failure is not None else opening.open if behind else await opening.open()
        if session is not None:
            from pydsh.apps.tui.app import PydshTui

            app = PydshTui(session, preview)
            with logging_to_file(), ended_by_signals(app):
                code = await app.run_async()
    finally:
        await opening.close()
    if opening.failure is not None:
        print(opening.failure, file=sys.stderr)
        return opening.failure_code
    return code or 0


class Opening:
    """The terminal's session being opened behind the first frame, and what it needs closed at the end."""

    def __init__(self, loaded: Callable[[], Awaitable[Host]], options: TuiOptions) -> None:
        self.loaded = loaded
        self.options = options
        self.controller: Controller | None = None
        self.failure: str | None = None
        self.failure_code = 1

    async def started(self) -> Controller | None:
        """The controller following the loaded host (made once), or ``None`` with :attr:`failure` set."""
        from pydsh.apps.tui.controller import Controller
        from pydsh.host.launch import refusal_code

        if self.controller is not None or self.failure is not None:
            return self.controller
        try:
            host = await self.loaded()
        except HostError as exc:
            self.failure = "\n".join(f"pydsh: {line}" for line in str(exc).splitlines())
            self.failure_code = refusal_code(exc)
            return None
        except LaunchFailed as exc:
            self.failure, self.failure_code = exc.line, exc.exit_code
            return None
        self.controller = Controller(host, self.options.cwd)
        self.controller.start()
        return self.controller

    async def preview(self) -> Preview | None:
        """The last turn of the session to resume, read from its log's end (``None``: open it first)."""
        controller = await self.started()
        if controller is None or self.options.resume is None:
            return None
        return controller.preview(self.options.resume)

    async def open(self) -> Controller | None:
        """The opened controller, or ``None`` with :attr:`failure` set (the host or the session refused)."""
        options = self.options
        controller = await self.started()
        if controller is None:
            return None
        try:
            await controller.open(options.resume, options.provider, options.model)
        except HostError as exc:
            self.failure = f"pydsh tui: {exc}"
            self.failure_code = 2 if exc.code in USAGE_REFUSALS else 1
            return None
        return controller

    async def close(self) -> None:
        if self.controller is not None:
            await self.controller.shutdown()


@contextlib.contextmanager
def ended_by_signals(app: App[int]) -> Iterator[None]:
    """A closed terminal (SIGHUP) or a SIGTERM ends the screen like a quit: the running turn is then stopped
    and logged as aborted on the way out, rather than the process dying with the turn open."""
    loop = asyncio.get_running_loop()
    for number in HANG_UPS:
        loop.add_signal_handler(number, app.exit)
    try:
        yield
    finally:
        for number in HANG_UPS:
            loop.remove_signal_handler(number)


@contextlib.contextmanager
def logging_to_file() -> Iterator[None]:
    """While the screen is up, log lines go to ``$DSH_HOME/logs/tui.log`` (stderr would tear the screen)."""
    from pydsh.kernel.compose import dsh_home

    root = logging.getLogger()
    saved = root.handlers[:]
    folder = dsh_home() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(folder / "tui.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [handler]
    try:
        yield
    finally:
        root.handlers[:] = saved
        handler.close()


name = "tui-app"
inject = (AGENTS, SESSIONS)


def apply(ctx: Context, config: None) -> None:
    """Provide the ``app`` service."""
    ctx.provide(APP, TuiApp(ctx))
