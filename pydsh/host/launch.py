"""Running a profile's app from the command line: load the host, hand it to the ``app`` service, unload."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pydsh.host.collector import paced
from pydsh.host.errors import HostError
from pydsh.host.keys import APP
from pydsh.kernel.events import EventBus, declared_events

if TYPE_CHECKING:
    from pydsh.host.host import Host
    from pydsh.kernel.compose import Row


SWITCH_INTERVAL_S = 0.001
"""How long a thread holding the GIL keeps it while another waits (CPython's default: 5 ms). What the stdin
reader and the log's writer thread hand the event loop waits until they hold it, and with tool threads
contending too, a request read from stdin waited up to 80 ms at the default while 500 sessions ran."""


@contextlib.contextmanager
def switching(interval: float) -> Iterator[None]:
    """CPython's thread switch interval set to ``interval`` for the block (as it was after)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextlib.contextmanager
def app_runtime(idle: Callable[[], bool]) -> Iterator[None]:
    """How every app runs, whichever launcher starts it: the collector paced (``pydsh.host.collector``;
    ``idle`` says whether no turn runs) and threads switching every :data:`SWITCH_INTERVAL_S`."""
    with paced(idle), switching(SWITCH_INTERVAL_S):
        yield


def configure_logging() -> None:
    """Every log line goes to stderr (stdout may carry a wire protocol)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pydsh: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


async def load_host(profile: str, rows: list[Row]) -> Host:
    """``rows`` loaded as ``profile``'s host with its app; ``HostError`` says why not. (The host's modules are
    imported here, not with this module: the terminal draws its first frame before they load.)"""
    from pydsh.host.host import Host

    return await Host.of_rows(profile, rows).start(service=APP)


def refusal_code(exc: HostError) -> int:
    """The exit code of a host that would not load: 2 for composition errors, 1 without an app."""
    return 1 if exc.code == "unavailable" else 2


async def started(profile: str, rows: list[Row]) -> Host | int:
    """``rows`` loaded as ``profile``'s host, or the exit code of why not (printed)."""
    try:
        return await load_host(profile, rows)
    except HostError as exc:
        for line in str(exc).splitlines():
            print(f"pydsh: {line}", file=sys.stderr)
        return refusal_code(exc)


async def serve(profile: str, rows: list[Row], args: list[str]) -> int:
    """Load ``rows`` as ``profile``'s host and run its app in the :func:`app_runtime`."""
    host = await started(profile, rows)
    if isinstance(host, int):
        return host
    try:
        with app_runtime(lambda: host.idle):
            return await host.ctx.require(APP).run(host, args)
    finally:
        await host.close()


def run_app(profile: str, rows: list[Row], args: list[str]) -> int:
    """The command line's entry into an app: logging to stderr, one event loop for the whole run."""
    configure_logging()
    return asyncio.run(serve(profile, rows, args))


def dump_events(profile: str, rows: list[Row]) -> int:
    """``--dump-events``: load the profile without running its app and print every event's listeners in order.

    Loading may hand fd 1 to an app's wire, so the report goes to a copy of stdout taken beforehand.
    """
    configure_logging()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout.flush()

    async def report() -> int:
        host = await started(profile, rows)
        if isinstance(host, int):
            return host
        try:
            out.write(event_table(host.ctx.runtime.bus))
        finally:
            await host.close()
        return 0

    with out:
        return asyncio.run(report())


def event_table(bus: EventBus) -> str:
    """Every declared event as YAML: its mode, the order it declares and its listeners in dispatch order."""
    import yaml

    table: dict[str, dict[str, object]] = {}
    for event in declared_events():
        entry: dict[str, object] = {"mode": event.mode}
        if event.order:
            entry["order"] = list(event.order)
        listeners = []
        for listener in bus.listeners(event):
            item: dict[str, object] = {"name": listener.name}
            if listener.before:
                item["before"] = list(listener.before)
            if listener.after:
                item["after"] = list(listener.after)
            listeners.append(item)
        entry["listeners"] = listeners
        table[event.name] = entry
    return yaml.safe_dump(table, sort_keys=False, allow_unicode=True, default_flow_style=None)
