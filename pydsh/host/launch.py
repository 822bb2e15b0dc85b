"""Running a profile's app from the command line: load the host, hand it to the ``app`` service, unload."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Protocol

from pydsh.host.errors import HostError
from pydsh.host.host import Host

if TYPE_CHECKING:
    from pydsh.kernel.compose import Row


class App(Protocol):
    """What an app bundle's row provides as the ``app`` service: a frontend over the host it runs in."""

    async def run(self, host: Host, args: list[str]) -> int: ...


def configure_logging() -> None:
    """Every log line goes to stderr (stdout may carry a wire protocol)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pydsh: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


async def serve(profile: str, rows: list[Row], args: list[str]) -> int:
    """Load ``rows`` as ``profile``'s host and run its app: 2 for composition errors, 1 without an app."""
    host = Host.of_rows(profile, rows)
    try:
        await host.start(service="app")
    except HostError as exc:
        for line in str(exc).splitlines():
            print(f"pydsh: {line}", file=sys.stderr)
        return 1 if exc.code == "unavailable" else 2
    try:
        app: App = host.ctx.require("app")
        return await app.run(host, args)
    finally:
        await host.close()


def run_app(profile: str, rows: list[Row], args: list[str]) -> int:
    """The command line's entry into an app: logging to stderr, one event loop for the whole run."""
    configure_logging()
    return asyncio.run(serve(profile, rows, args))
