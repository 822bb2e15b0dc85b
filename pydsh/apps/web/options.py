"""``pydsh web`` options (spec 12 §1): parsing, and the loopback rule checked before anything binds."""

from __future__ import annotations

import argparse
import ipaddress
import os
from dataclasses import dataclass, field

from pydsh.apps.usage import UsageError, UsageParser

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3080
USAGE = (
    "pydsh web [--patch FILE]... [--host 127.0.0.1] [--port 3080] [--no-open] [--allow-public]\n"
    "                 [--trusted-host NAME]... [--cwd DIR]"
)


@dataclass(frozen=True)
class WebOptions:
    """What ``pydsh web`` was asked to do."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    open_browser: bool = True
    allow_public: bool = False
    trusted_hosts: tuple[str, ...] = ()
    cwd: str = field(default_factory=os.getcwd)


def parse_options(args: list[str]) -> WebOptions:
    """The app's own options (launcher options such as ``--patch`` were taken before)."""
    parser = UsageParser(prog="pydsh web", usage=USAGE, description="Serve the pydsh browser frontend.")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help="TCP port; 0 picks a free one")
    parser.add_argument("--no-open", action="store_true", help="do not open a browser")
    parser.add_argument("--allow-public", action="store_true", help="allow a non-loopback --host")
    parser.add_argument("--trusted-host", action="append", default=[], metavar="NAME", help="accept this Host header")
    parser.add_argument("--cwd", help="first workspace (default: the current directory)")
    ns = parser.parse_args(args)
    cwd = os.path.abspath(os.path.expanduser(ns.cwd or os.getcwd()))
    if not os.path.isdir(cwd):
        raise UsageError(f'--cwd "{ns.cwd}" is not an existing directory')
    return WebOptions(
        host=ns.host,
        port=ns.port,
        open_browser=not ns.no_open,
        allow_public=ns.allow_public,
        trusted_hosts=tuple(ns.trusted_host),
        cwd=cwd,
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is outside 0-65535")
    return value


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` and ``::1`` (C4); any other name or address is reachable from elsewhere."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(options: WebOptions) -> str | None:
    """The C4 refusal line for a public ``--host`` without ``--allow-public``, else ``None``."""
    if is_loopback(options.host) or options.allow_public:
        return None
    return (
        f"refusing to listen on {options.host}: it is reachable from other machines; pass --allow-public if you mean it"
    )


def host_literal(host: str) -> str:
    """``host`` as it appears in a URL or ``Host`` header (IPv6 addresses bracketed)."""
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare
