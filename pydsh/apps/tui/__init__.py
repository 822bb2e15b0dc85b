"""The ``tui-app`` plugin: ``pydsh tui`` (and a bare ``pydsh`` in a terminal) is an interactive session.

This module stays light: Textual is imported by :meth:`TuiApp.run` only, so no other profile's start
path pays for it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydsh.agent.keys import AGENTS
from pydsh.apps.tui.options import TuiOptions, parse_options
from pydsh.apps.usage import parsed
from pydsh.host.errors import HostError
from pydsh.host.keys import APP
from pydsh.kernel.context import Context
from pydsh.session.keys import SESSIONS

if TYPE_CHECKING:
    from pydsh.host import Host

INSTALL = "pydsh: the terminal UI needs the textual package: pip install textual (or reinstall pydsh)"
USAGE_REFUSALS = frozenset({"not_found", "member_session", "bad_workspace", "bad_session_id", "owned_elsewhere"})
"""Refusals of ``--resume`` and ``--cwd``: exit 2 like a usage error."""


def textual_missing() -> bool:
    """Whether Textual cannot be imported (checked without importing it)."""
    return importlib.util.find_spec("textual") is None


class TuiApp:
    """The ``app`` service of the ``tui`` profile."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def run(self, host: Host, args: list[str]) -> int:
        options = parsed(parse_options, args)
        if isinstance(options, int):
            return options
        if textual_missing():
            print(INSTALL, file=sys.stderr)
            return 2
        return await run_tui(host, options)


async def run_tui(host: Host, options: TuiOptions) -> int:
    """Open the session, run the screen until the user quits, then stop what still runs."""
    from pydsh.apps.tui.controller import Controller

    controller = Controller(host, options.cwd)
    controller.start()
    try:
        await controller.open(options.resume, options.provider, options.model)
    except HostError as exc:
        await controller.shutdown()
        print(f"pydsh tui: {exc}", file=sys.stderr)
        return 2 if exc.code in USAGE_REFUSALS else 1
    from pydsh.apps.tui.app import PydshTui

    try:
        with logging_to_file():
            code = await PydshTui(controller).run_async()
    finally:
        await controller.shutdown()
    return code or 0


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
