"""The ``pydsh`` launcher: profile selection, patch layers, config dumps and app dispatch (spec 06 §2.2).

``pydsh [--profile] NAME [--from-default-profile TEMPLATE] [--patch FILE]... [DUMP] [APP ARGS...]``
composes the profile, loads it, and hands the app arguments to the ``app`` service its app bundle
provides. Exit codes: 0 success, 1 usage or run failure, 2 composition errors and a bare ``pydsh``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydsh import __version__
from pydsh.apps.usage import LaunchFailed, UsageError

if TYPE_CHECKING:
    from pydsh.kernel.compose import Row
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import ProfileError

HELP = """\
Usage: pydsh [--profile] <name> [--patch <path>]... [--dump-config[=resolved]] [app-args...]
       pydsh                       (in a terminal: the same as pydsh tui)
       pydsh tui [--resume ID] [--cwd DIR] [--provider P --model M]
       pydsh headless [--json] [--session-id ID] [--cwd DIR] [--provider P --model M] TASK...
       pydsh headless --compact ID
       pydsh --profile sdk [--patch <path>]...
       pydsh acp [--patch <path>]... [--provider P --model M]
       pydsh web [--patch <path>]... [--host 127.0.0.1] [--port 3080] [--no-open] [--allow-public] [--cwd DIR]
       pydsh demo
       pydsh batch TASKS.jsonl|DIR [--out DIR] [--workers N] [--ray auto|ADDRESS] [--timeout S] ...
       pydsh plugin --profile <name> (add <requirement>... | remove <distribution>... | list)

Run a DeepSeek Harness agent composition.

Options:
  --profile NAME               the profile to compose (a leading NAME works too)
  --from-default-profile NAME  first replace the profile with a fresh copy of shipped template NAME
                               (its previous profile.yml and patch.yml are kept as *.bak)
  --patch PATH                 an extra patch layer, applied after the profile's layers (repeatable)
  --dump-config[=resolved]     print the composed row tree as YAML and exit (resolved: interpolated)
  --dump-default-config        print the tree of the profile's bundles alone (no patch.yml, no --patch)
  --dump-config-schema         print the JSON Schema of the profile's rows and of patch files
  --dump-events                load the profile without running its app and print every event's
                               listeners in the order they run (with the order each event declares)
  -V, --version                print the version
  -h, --help                   show this help
"""
LAUNCHER = 1
"""The exit code of a usage error in the launcher's own options (an app's usage errors exit 2)."""
EXIT_BARE = 2
"""A bare ``pydsh`` without a terminal: the usage, as for any command line that names nothing to do."""
TERMINAL = "tui"
"""The profile a bare ``pydsh`` runs in a terminal: its screen is drawn before the profile is composed."""
TERMINAL_APP = "tui-app"
"""The terminal UI's plugin: a composition holding it draws its screen before its host loads."""
VALUED = {"--profile": "a name", "--from-default-profile": "a name", "--patch": "a path"}
DUMPS = {
    "--dump-config": "written",
    "--dump-default-config": "default",
    "--dump-config-schema": "schema",
    "--dump-events": "events",
}
DUMPS_EXCLUSIVE = "--dump-config, --dump-default-config, and --dump-config-schema are mutually exclusive"
"""The reference runtime's words for two config dumps at once."""
EVENTS_EXCLUSIVE = "--dump-events prints the event table alone and takes no config dump"


@dataclass
class Launch:
    """What the launcher options ask for; ``app_args`` go to the profile's app."""

    profile: str | None = None
    patches: list[str] = field(default_factory=list)
    dump: str | None = None
    """``written``, ``resolved``, ``default``, ``schema`` or ``events``: which dump to print instead of running."""
    from_default: str | None = None
    """The shipped template to recreate the profile from before composing it."""
    app_args: list[str] = field(default_factory=list)
    help: bool = False
    version: bool = False

    def starts_with_options(self) -> bool:
        """Whether an option already came: a leading name is the profile only before any."""
        return bool(self.patches) or self.dump is not None or self.from_default is not None


def parse_launch(argv: list[str]) -> Launch:
    """Split launcher options from app arguments (the first other token starts the app's)."""
    launch = Launch()
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in VALUED:
            if not eq and i + 1 < len(argv):
                inline = argv[i + 1]
                i += 1
            set_valued(launch, flag, inline)
        elif flag in DUMPS:
            set_dump(launch, flag, inline if eq else None)
        elif arg in ("-h", "--help") and launch.profile is None:
            launch.help = True
        elif arg in ("-V", "--version"):
            launch.version = True
        elif launch.profile is None and not arg.startswith("-") and not launch.starts_with_options():
            launch.profile = arg
        elif launch.profile is None and arg.startswith("-"):
            raise UsageError(f"unknown option '{arg}'", LAUNCHER)
        else:
            launch.app_args = argv[i:]
            break
        i += 1
    return launch


def set_valued(launch: Launch, flag: str, value: str) -> None:
    """Record ``--profile``, ``--from-default-profile`` or ``--patch`` (``value`` "" = missing)."""
    if not value:
        raise UsageError(f"{flag} needs {VALUED[flag]}", LAUNCHER)
    if flag == "--patch":
        launch.patches.append(value)
    elif flag == "--from-default-profile":
        launch.from_default = value
    elif launch.profile is not None:
        raise UsageError("select a profile only once", LAUNCHER)
    else:
        launch.profile = value


def set_dump(launch: Launch, flag: str, value: str | None) -> None:
    """Record one dump flag; only ``--dump-config`` takes a value (``resolved``), and one dump is printed."""
    if value is not None and (flag != "--dump-config" or value != "resolved"):
        accepted = "takes only the value resolved" if flag == "--dump-config" else "takes no value"
        raise UsageError(f'{flag} {accepted}, got "{value}"', LAUNCHER)
    dump = "resolved" if value is not None else DUMPS[flag]
    if launch.dump is not None and launch.dump != dump:
        events = "events" in (launch.dump, dump)
        raise UsageError(EVENTS_EXCLUSIVE if events else DUMPS_EXCLUSIVE, LAUNCHER)
    launch.dump = dump


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = _main(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    if argv is None:
        sys.exit(code)
    return code


def _main(argv: list[str]) -> int:
    if not argv:
        return no_arguments()
    if argv[:1] == ["plugin"]:
        from pydsh.apps.plugins import run_plugin

        return run_plugin(argv[1:])
    if argv[:1] == ["demo"]:
        from pydsh.apps.demo import run_demo

        return run_demo(argv[1:])
    if argv[:1] == ["batch"]:
        from pydsh.batch.cli import run_batch

        return run_batch(argv[1:])
    launch = parse_launch(argv)
    if launch.version:
        print(f"pydsh {__version__}")
        return 0
    if launch.help:
        print(HELP, end="")
        return 0
    if launch.profile is None:
        raise UsageError("--profile <name> is required", LAUNCHER)
    return run_profile(launch)


def no_arguments() -> int:
    """A bare ``pydsh`` (the one place that decides what no arguments do): in a terminal, the interactive
    session of the ``tui`` profile; otherwise the usage on stderr, exit 2."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(HELP, end="", file=sys.stderr)
        return EXIT_BARE
    from pydsh.apps.tui import INSTALL, textual_missing

    if textual_missing():
        print(INSTALL, file=sys.stderr)
        return EXIT_BARE
    return run_profile(Launch(profile=TERMINAL))


def start_up_failed(exc: ProfileError | KernelError) -> int:
    """Print a profile or composition error as its one line; the exit code it calls for."""
    failure = launch_failure(exc)
    print(failure.line, file=sys.stderr)
    return failure.exit_code


def launch_failure(exc: ProfileError | KernelError) -> LaunchFailed:
    """A profile or composition error as the one line and exit code the launcher ends with."""
    from pydsh.kernel.profiles import ProfileError

    if isinstance(exc, ProfileError):
        return LaunchFailed(str(exc), exc.exit_code)
    return LaunchFailed(f"pydsh: {exc.detail}", 2)


def check_dump(launch: Launch) -> None:
    """A config dump runs no app: app arguments, or ``--patch`` with the default tree, are usage errors."""
    if launch.dump is None:
        return
    if launch.app_args:
        raise UsageError(f'config dumps take no app arguments, got "{" ".join(launch.app_args)}"', LAUNCHER)
    if launch.dump == "default" and launch.patches:
        raise UsageError("--dump-default-config prints the bundle layers and takes no --patch", LAUNCHER)


def run_profile(launch: Launch, extra_bundles: tuple[str, ...] = ()) -> int:
    """Compose ``launch.profile`` and run its app with the app arguments (or print the dump asked for)."""
    from pydsh.kernel.compose import resolve_rows
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import ProfileError, compose_profile

    assert launch.profile is not None
    check_dump(launch)
    if launch.profile == TERMINAL and launch.dump is None and launch.from_default is None:
        return terminal_first(launch, extra_bundles)
    try:
        if launch.from_default is not None:
            recreate(launch.profile, launch.from_default)
        if launch.dump in ("default", "schema"):
            return dump_without_running(launch)
        comp = compose_profile(launch.profile, launch.patches, extra_bundles)
        warn(comp.warnings)
        if launch.dump == "written":
            sys.stdout.write(comp.dump())
            return 0
        rows = resolve_rows(comp.rows)
        if launch.dump == "events":
            from pydsh.host.launch import dump_events

            return dump_events(launch.profile, rows)
        if launch.dump is not None:
            from pydsh.kernel.compose import Composition

            sys.stdout.write(Composition(rows=rows).dump())
            return 0
    except (ProfileError, KernelError) as exc:
        return start_up_failed(exc)
    from pydsh.kernel.compose import walk

    if any(row.name == TERMINAL_APP for _holder, row in walk(rows)):
        from pydsh.apps.tui import launch as launch_terminal

        return launch_terminal(launch.profile, lambda: rows, launch.app_args)
    from pydsh.host.launch import run_app

    return run_app(launch.profile, rows, launch.app_args)


def terminal_first(launch: Launch, extra_bundles: tuple[str, ...]) -> int:
    """The terminal profile: its screen is drawn first and the profile composed behind it, so the prompt
    shows before the composition's modules load; its warnings are printed once the screen has closed."""
    from pydsh.apps.tui import launch as launch_terminal

    assert launch.profile is not None
    warnings: list[str] = []

    def composed() -> list[Row]:
        from pydsh.kernel.compose import resolve_rows, walk
        from pydsh.kernel.errors import KernelError
        from pydsh.kernel.profiles import ProfileError, compose_profile

        assert launch.profile is not None
        try:
            comp = compose_profile(launch.profile, launch.patches, extra_bundles)
            warnings.extend(comp.warnings)
            rows = resolve_rows(comp.rows)
        except (ProfileError, KernelError) as exc:
            raise launch_failure(exc) from exc
        if not any(row.name == TERMINAL_APP for _holder, row in walk(rows)):
            raise LaunchFailed(
                f"pydsh: profile {launch.profile} has no {TERMINAL_APP} row; recreate it with "
                f"pydsh --profile {launch.profile} --from-default-profile {TERMINAL}",
                2,
            )
        return rows

    try:
        return launch_terminal(launch.profile, composed, launch.app_args)
    finally:
        warn(warnings)


def warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"pydsh: warning: {warning}", file=sys.stderr)


def recreate(profile: str, template: str) -> None:
    """``--from-default-profile``: a fresh copy of ``template`` as ``profile``, saying where the old files went."""
    from pydsh.kernel.profiles import reset_profile

    kept = reset_profile(profile, template)
    if kept:
        names = " and ".join(path.name for path in kept)
        print(f'pydsh: profile "{profile}" recreated from template "{template}"; kept the old {names}', file=sys.stderr)


def dump_without_running(launch: Launch) -> int:
    """``--dump-default-config`` (the bundles' tree) or ``--dump-config-schema`` (JSON Schema of rows and patches)."""
    import json

    from pydsh.kernel.profiles import compose_default, compose_profile

    assert launch.profile is not None
    if launch.dump == "default":
        comp = compose_default(launch.profile)
        warn(comp.warnings)
        sys.stdout.write(comp.dump())
        return 0
    from pydsh.kernel.schema import config_schema

    comp = compose_profile(launch.profile, launch.patches)
    warn(comp.warnings)
    sys.stdout.write(json.dumps(config_schema(launch.profile, comp.rows), indent=2, ensure_ascii=False) + "\n")
    return 0
