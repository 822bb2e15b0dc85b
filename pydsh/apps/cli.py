"""The ``pydsh`` launcher: profile selection, patch layers, ``--dump-config`` and app dispatch (spec 06 §2.2).

``pydsh [--profile] NAME [--patch FILE]... [--dump-config[=resolved]] [APP ARGS...]`` composes
the profile, loads it, and hands the app arguments to the ``app`` service its app bundle
provides. Exit codes: 0 success, 1 usage or run failure, 2 composition errors.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydsh import __version__

if TYPE_CHECKING:
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import ProfileError

HELP = """\
Usage: pydsh [--profile] <name> [--patch <path>]... [--dump-config[=resolved]] [app-args...]
       pydsh headless "TASK" [--cwd DIR] [--session ID] [--resume ID] [--json] [--provider P --model M]
       pydsh headless --compact ID
       pydsh --profile sdk [--patch <path>]...
       pydsh acp [--patch <path>]... [--provider P --model M]
       pydsh web [--patch <path>]... [--host 127.0.0.1] [--port 3080] [--no-open] [--allow-public] [--cwd DIR]
       pydsh demo
       pydsh plugin --profile <name> (add <requirement>... | remove <distribution>... | list)

Run a DeepSeek Harness agent composition.

Options:
  --profile NAME        the profile to compose (a leading NAME works too)
  --patch PATH          an extra patch layer, applied after the profile's layers (repeatable)
  --dump-config         print the composed row tree as YAML and exit
  -V, --version         print the version
  -h, --help            show this help
"""


class UsageError(Exception):
    """A command-line problem: printed as is, exit code 1."""


@dataclass
class Launch:
    profile: str | None = None
    patches: list[str] = field(default_factory=list)
    dump: str | None = None
    app_args: list[str] = field(default_factory=list)
    help: bool = False
    version: bool = False


def parse_launch(argv: list[str]) -> Launch:
    """Split launcher options from app arguments (the first other token starts the app's)."""
    launch = Launch()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--profile" or arg.startswith("--profile="):
            if launch.profile is not None:
                raise UsageError("error: select a profile only once")
            if arg == "--profile":
                if i + 1 >= len(argv):
                    raise UsageError("error: --profile needs a name")
                value = argv[i + 1]
                i += 1
            else:
                value = arg.partition("=")[2]
            if not value:
                raise UsageError("error: --profile needs a name")
            launch.profile = value
        elif arg == "--patch":
            if i + 1 >= len(argv):
                raise UsageError("error: --patch needs a path")
            launch.patches.append(argv[i + 1])
            i += 1
        elif arg == "--dump-config" or arg.startswith("--dump-config="):
            launch.dump = arg.partition("=")[2] or "written"
        elif arg in ("-h", "--help") and launch.profile is None:
            launch.help = True
        elif arg in ("-V", "--version"):
            launch.version = True
        elif launch.profile is None and not arg.startswith("-") and not launch.patches and launch.dump is None:
            launch.profile = arg
        else:
            launch.app_args = argv[i:]
            break
        i += 1
    return launch


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = _main(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    if argv is None:
        sys.exit(code)
    return code


def _main(argv: list[str]) -> int:
    if argv[:1] == ["plugin"]:
        from pydsh.apps.plugins import run_plugin

        return run_plugin(argv[1:])
    if argv[:1] == ["demo"]:
        from pydsh.apps.demo import run_demo

        return run_demo(argv[1:])
    launch = parse_launch(argv)
    if launch.version:
        print(f"pydsh {__version__}")
        return 0
    if launch.help:
        print(HELP, end="")
        return 0
    if launch.profile is None:
        raise UsageError("error: --profile <name> is required")
    return run_profile(launch)


def start_up_failed(exc: ProfileError | KernelError) -> int:
    """Print a profile or composition error as its one line; the exit code it calls for."""
    from pydsh.kernel.profiles import ProfileError

    if isinstance(exc, ProfileError):
        print(exc, file=sys.stderr)
        return exc.exit_code
    print(f"pydsh: {exc.detail}", file=sys.stderr)
    return 2


def run_profile(launch: Launch, extra_bundles: tuple[str, ...] = ()) -> int:
    """Compose ``launch.profile`` and run its app with the app arguments."""
    from pydsh.kernel.compose import resolve_rows
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import ProfileError, compose_profile

    assert launch.profile is not None
    try:
        comp = compose_profile(launch.profile, launch.patches, extra_bundles)
        for warning in comp.warnings:
            print(f"pydsh: warning: {warning}", file=sys.stderr)
        if launch.dump == "written":
            sys.stdout.write(comp.dump())
            return 0
        rows = resolve_rows(comp.rows)
        if launch.dump is not None:
            from pydsh.kernel.compose import Composition

            sys.stdout.write(Composition(rows=rows).dump())
            return 0
    except (ProfileError, KernelError) as exc:
        return start_up_failed(exc)
    from pydsh.host.launch import run_app

    return run_app(launch.profile, rows, launch.app_args)
