"""The ``pydsh tui`` command line: which session to open, where, and on which model."""

from __future__ import annotations

from dataclasses import dataclass

from pydsh.apps.usage import UsageError, UsageParser

USAGE = "pydsh tui [--resume ID] [--cwd DIR] [--provider P --model M]"


@dataclass(frozen=True)
class TuiOptions:
    """A session to resume (else a new one in ``cwd``) and the route of a new session."""

    resume: str | None = None
    cwd: str | None = None
    provider: str | None = None
    model: str | None = None


def parse_options(args: list[str]) -> TuiOptions:
    """The options, checked: ``--resume`` keeps the session's workspace, a route needs provider and model."""
    parser = UsageParser(prog="pydsh tui", usage=USAGE, add_help=True)
    parser.add_argument("--resume", metavar="ID", help="continue a persisted session")
    parser.add_argument("--cwd", help="workspace of a new session (default: the current directory)")
    parser.add_argument("--provider")
    parser.add_argument("--model")
    ns, unknown = parser.parse_known_args(args)
    if unknown:
        raise UsageError(f"unknown argument '{unknown[0]}'")
    if ns.resume and ns.cwd:
        raise UsageError("--resume keeps the session's workspace; --cwd is for a new session")
    if bool(ns.provider) != bool(ns.model):
        raise UsageError("give --provider and --model together")
    cwd = None
    if ns.cwd:
        from pydsh.host.errors import HostError
        from pydsh.host.workspace import check_workspace  # the session layer: only for a --cwd to check

        try:
            cwd = check_workspace(ns.cwd)
        except HostError as exc:
            raise UsageError(f"--{exc}") from None
    return TuiOptions(ns.resume, cwd, ns.provider, ns.model)
