"""The ``web-app`` plugin: ``pydsh web`` serves the browser frontend from the kernel's process (spec 12).

This module stays light: starlette, uvicorn and sse-starlette are imported by :meth:`WebApp.run`
only, so no other profile's start path pays for them (C6).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import sys
from typing import Any

from pydsh.apps.web.options import WebOptions, WebUsageError, host_literal, is_loopback, parse_options, refusal
from pydsh.apps.web.state import Config
from pydsh.kernel.context import Context

log = logging.getLogger("pydsh.web")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SHUTDOWN_BOUND_S = 5.0


class WebApp:
    """The ``app`` service of the ``web`` profile."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config

    async def run(self, args: list[str]) -> int:
        try:
            options = parse_options(args)
        except WebUsageError as exc:
            print(exc, file=sys.stderr)
            return 2
        except SystemExit as exc:
            return int(exc.code or 0)
        refused = refusal(options)
        if refused is not None:
            print(refused, file=sys.stderr)
            return 2
        try:
            import sse_starlette  # noqa: F401
            import starlette  # noqa: F401
            import uvicorn  # noqa: F401
        except ImportError as exc:
            print(f"pydsh web: the {exc.name} package is missing; reinstall pydsh to get it", file=sys.stderr)
            return 2
        try:
            sock = bind(options)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                print(f"port {options.port} is in use; pass --port 0 for any free port", file=sys.stderr)
            else:
                print(f"pydsh web: cannot listen on {options.host}:{options.port}: {exc.strerror}", file=sys.stderr)
            return 1
        if not is_loopback(options.host):
            print(
                f"pydsh web: warning: listening on {options.host}, reachable from other machines",
                file=sys.stderr,
            )
        return await serve(self.ctx, self.config, options, sock)


def bind(options: WebOptions) -> socket.socket:
    """The listening socket, bound before anything else starts (a port in use fails here)."""
    infos = socket.getaddrinfo(options.host.strip("[]"), options.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(ctx: Context, config: Config, options: WebOptions, sock: socket.socket) -> int:
    """Run uvicorn on this loop until SIGINT/SIGTERM, then stop cleanly (C5)."""
    import uvicorn

    from pydsh.apps.web.api import build_app
    from pydsh.apps.web.auth import allowed_hosts, new_token
    from pydsh.apps.web.hub import WebHub
    from pydsh.apps.web.state import WebState
    from pydsh.kernel.compose import dsh_home

    port = sock.getsockname()[1]
    token = new_token()
    info = ctx.get("host_info") or {}
    state = WebState(
        ctx,
        home=dsh_home(),
        port=port,
        token=token,
        first_workspace=options.cwd,
        profile=str(info.get("profile") or "web"),
        config=config,
    )
    hub = WebHub(ctx, options.cwd)
    hub.start()
    ctx.provide("web_hub", hub)
    app = build_app(hub, state, allowed_hosts(options.host, port, options.trusted_hosts))
    server = _Server(
        uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=2,
        )
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started and not task.done():
            await asyncio.sleep(0.005)
        if task.done():
            task.result()
            return 1
        url = f"http://{host_literal(options.host)}:{port}/?token={token}"
        print(f"pydsh web: {url}", flush=True)
        if options.open_browser:
            loop.run_in_executor(None, _open_browser, url)
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        await hub.stop()
        server.should_exit = True
        await asyncio.wait({task}, timeout=SHUTDOWN_BOUND_S)
        sock.close()
    return 0


def _open_browser(url: str) -> None:
    """C3: no browser is not an error."""
    import webbrowser

    try:
        webbrowser.open(url)
    except Exception:
        log.info("no browser could be opened", exc_info=True)


def _Server(config: Any) -> Any:
    """uvicorn without its own signal handling: the app stops it after cleaning up."""
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        def capture_signals(self) -> Any:
            return contextlib.nullcontext()

    return Server(config)


name = "web-app"
inject = ("agents", "sessions", "llm")


def apply(ctx: Context, config: Config | None) -> None:
    """Provide the ``app`` service (config: optional panels, see ``state.Config``)."""
    ctx.provide("app", WebApp(ctx, config or Config()))
