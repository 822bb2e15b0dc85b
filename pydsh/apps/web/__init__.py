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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydsh.agent.keys import AGENTS, SYSTEM_PROMPT
from pydsh.apps.usage import parsed
from pydsh.apps.web import memory
from pydsh.apps.web.hub import WebHub
from pydsh.apps.web.limits import Throttle, open_file_limit
from pydsh.apps.web.options import WebOptions, host_literal, is_loopback, parse_options, refusal
from pydsh.apps.web.state import STATIC, Config, WebState
from pydsh.apps.web.surface import WebSurface, source_checkout
from pydsh.host.keys import APP
from pydsh.kernel.context import Context
from pydsh.kernel.keys import HOST_INFO
from pydsh.llm.keys import LLM
from pydsh.session.keys import SESSION_INDEX, SESSIONS

if TYPE_CHECKING:
    from pydsh.host import Host

log = logging.getLogger("pydsh.web")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
SHUTDOWN_BOUND_S = 5.0


class WebApp:
    """The ``app`` service of the ``web`` profile."""

    def __init__(self, ctx: Context, config: Config, surface: WebSurface) -> None:
        self.ctx = ctx
        self.config = config
        self.surface = surface

    async def run(self, host: Host, args: list[str]) -> int:
        options = parsed(parse_options, args)
        if isinstance(options, int):
            return options
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
        return await serve(host, self.config, options, sock)


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


@dataclass
class RunningServer:
    """A started ``pydsh web`` server: its URL, token, hub and state; :meth:`stop` ends it (C5)."""

    base: str
    token: str
    hub: WebHub
    state: WebState
    server: Any
    task: asyncio.Task[None]
    sock: socket.socket
    throttle: Throttle
    surface: WebSurface | None

    @property
    def url(self) -> str:
        return f"{self.base}/?token={self.token}"

    async def stop(self) -> None:
        """Cancel running turns, resolve what waits as ``cancelled``, flush, then stop serving."""
        await self.hub.stop()
        if self.surface is not None:
            self.surface.url = None
        self.server.should_exit = True
        await asyncio.wait({self.task}, timeout=SHUTDOWN_BOUND_S)
        self.sock.close()
        self.throttle.unwatch()


async def start_server(
    host: Host, config: Config, options: WebOptions, sock: socket.socket, static_dir: Path = STATIC
) -> RunningServer:
    """Serve the app on ``sock`` from this loop (the page from ``static_dir``); returns once uvicorn listens."""
    import uvicorn

    from pydsh.apps.web.api import build_app
    from pydsh.apps.web.auth import allowed_hosts, new_token
    from pydsh.apps.web.connections import protocol_class
    from pydsh.kernel.compose import dsh_home

    ctx = host.ctx
    port = sock.getsockname()[1]
    token = new_token()
    info = ctx.get(HOST_INFO)
    state = WebState(
        ctx,
        home=dsh_home(),
        port=port,
        token=token,
        first_workspace=options.cwd,
        profile=info["profile"] if info is not None else "web",
        config=config,
        static_dir=static_dir,
    )
    memory.tune()
    hub = WebHub(host)
    hub.start()
    throttle = Throttle(config.limits.fitted(open_file_limit()))
    app = build_app(hub, state, allowed_hosts(options.host, port, options.trusted_hosts), throttle)
    server = _Server(
        uvicorn.Config(
            app,
            http=protocol_class(throttle),
            backlog=throttle.limits.maxConnections,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_graceful_shutdown=2,
        )
    )
    throttle.watch(asyncio.get_running_loop())
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.005)
    if task.done():
        throttle.unwatch()
        await hub.stop()
        task.result()
        raise OSError("the web server stopped while starting")
    base = f"http://{host_literal(options.host)}:{port}"
    app_service = ctx.get(APP)
    surface = app_service.surface if isinstance(app_service, WebApp) else None
    if surface is not None:
        surface.url = f"{base}/"
    return RunningServer(base, token, hub, state, server, task, sock, throttle, surface)


async def serve(host: Host, config: Config, options: WebOptions, sock: socket.socket) -> int:
    """Run until SIGINT/SIGTERM (or the server fails), then stop cleanly and exit 0 (C2, C3, C5)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        running = await start_server(host, config, options, sock)
        print(f"pydsh web: {running.url}", flush=True)
        if options.open_browser:
            loop.run_in_executor(None, _open_browser, running.url)
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({running.task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        failed = running.task.done() and not running.task.cancelled() and running.task.exception() is not None
        await running.stop()
        return 1 if failed else 0
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


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
inject = (AGENTS, SESSIONS, LLM, SESSION_INDEX)
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: Config | None) -> None:
    """Provide the ``app`` service (config: optional panels, see ``state.Config``) and the web app's
    runtime-context sections (the model is told where pydsh's source is and where the page is served)."""
    surface = WebSurface(source_checkout())
    surface.register(ctx)
    ctx.provide(APP, WebApp(ctx, config or Config(), surface))
