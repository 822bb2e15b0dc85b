"""``pydsh acp``: editors such as Zed drive pydsh agents over the Agent Client Protocol (spec 11 Part A).

The ``acp`` row takes fd 1 for protocol frames when it activates (``sys.stdout`` and fd 1 itself
then point at stderr, so no stray print reaches the editor) and provides the ``app`` service,
which serves newline-delimited JSON-RPC on stdio until end of input, then closes every session
and exits 0. The ``agent-client-protocol`` package is an optional extra, imported only here, when
the row activates; ``bridge.py`` and the modules it uses need it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pydsh.agent.keys import AGENT_DEFAULT_MODEL, AGENTS
from pydsh.apps.stdio import FrameWriter, StdinReader, frame_writer, pace_model_streams
from pydsh.apps.usage import UsageError, UsageParser
from pydsh.host.keys import APP
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.session.keys import SESSIONS

if TYPE_CHECKING:
    from pydsh.apps.acp.bridge import Bridge
    from pydsh.apps.acp.options import Selection
    from pydsh.apps.acp.transport import StdioTransport
    from pydsh.host import Host

INSTALL_HINT = (
    "pydsh acp: the ACP bridge needs the agent-client-protocol package, "
    "which is not installed; install it with: pip install 'pydsh[acp]'"
)
USAGE = "pydsh acp [--patch <path>]... [--provider P --model M]"
HELP = f"""\
Usage: {USAGE}

Serve an editor (Zed and other Agent Client Protocol clients) over stdio.
The editor starts this command and speaks JSON-RPC on its stdin and stdout.

Options:
  --provider P --model M   the model route of new sessions (default: the profile's)
  -h, --help               show this help
"""


class Config(BaseModel):
    """``acp`` row config (spec 11 §A.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str | None = None
    model: str | None = None
    sessionListPageSize: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _route_pair(self) -> Config:
        if bool(self.provider) != bool(self.model):
            raise ValueError("give provider and model together")
        return self


def parse_args(args: list[str]) -> argparse.Namespace:
    parser = UsageParser(prog="pydsh acp", usage=USAGE, add_help=False)
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--provider")
    parser.add_argument("--model")
    ns = parser.parse_args(args)
    if bool(ns.provider) != bool(ns.model):
        raise UsageError("give --provider and --model together")
    return ns


class MissingExtra:
    """The ``app`` when the ``acp`` extra is not installed: one line naming the install command, exit 2."""

    async def run(self, host: Host, args: list[str]) -> int:
        print(INSTALL_HINT, file=sys.stderr)
        return 2


class AcpApp:
    """The ``app`` service of ``pydsh acp``."""

    def __init__(self, ctx: Context, config: Config, out: FrameWriter) -> None:
        self.ctx = ctx
        self.config = config
        self.out = out
        self._stop = asyncio.Event()

    def output_lost(self) -> None:
        """The editor stopped reading: serve no further (the sessions close as at end of input)."""
        self._stop.set()

    def _default(self, ns: argparse.Namespace) -> Selection | None:
        """The route of new sessions: the command line, the row config, else the default route."""
        from pydsh.apps.acp.options import Selection

        if ns.provider:
            return Selection(ns.provider, ns.model)
        if self.config.provider and self.config.model:
            return Selection(self.config.provider, self.config.model)
        default = self.ctx.get(AGENT_DEFAULT_MODEL)
        if default is None:
            return None
        route = default.current_selection()
        return Selection(route["provider"], route["model"])

    async def run(self, host: Host, args: list[str]) -> int:
        try:
            ns = parse_args(args)
        except UsageError as exc:
            print(f"{exc}\nusage: {USAGE}", file=sys.stderr)
            return exc.exit_code
        if ns.help:
            self.out.write(HELP.encode())
            await self.out.flush()
            return 0
        from pydsh.apps.acp.bridge import Bridge
        from pydsh.apps.acp.transport import StdioTransport

        bridge = Bridge(host, self.config.sessionListPageSize, self._default(ns))
        pacing = pace_model_streams(self.ctx, self.out)
        try:
            return await self._serve(bridge, StdioTransport(StdinReader(), self.out, bridge.cancel_soon))
        finally:
            pacing()

    async def _serve(self, bridge: Bridge, transport: StdioTransport) -> int:
        """Serve until end of input, the editor going away, or SIGTERM/SIGINT; then close every session (exit 0)."""
        import acp

        loop = asyncio.get_running_loop()
        serving = asyncio.ensure_future(acp.run_agent(cast("acp.Agent", bridge), transport, use_unstable_protocol=True))
        stopping = asyncio.ensure_future(self._stop.wait())
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, serving.cancel)
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        finally:
            stopping.cancel()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            for failure in await bridge.dispose():
                print(f"pydsh acp: closing {failure}", file=sys.stderr)
        return 0


name = "acp"
inject = (AGENTS, SESSIONS, LLM)


async def apply(ctx: Context, config: Config) -> None:
    """Import the ACP library (the optional extra), take stdout for frames, provide the ``app``."""
    try:
        import acp  # noqa: F401
    except ImportError:
        ctx.provide(APP, MissingExtra())
        return
    app: AcpApp | None = None

    def output_lost() -> None:
        if app is not None:
            app.output_lost()

    app = AcpApp(ctx, config, await frame_writer(ctx, output_lost))
    ctx.provide(APP, app)
