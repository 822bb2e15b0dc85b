"""``pydsh plugin --profile NAME add|remove|list``: install plugin distributions into a profile (spec 01 §15.2).

``add`` runs this interpreter's pip, reads the ``pydsh.bundles`` entry points of what it installed
and appends those bundles to the profile's ``profile.yml`` (rewritten atomically), recording them
under ``plugins``. ``remove`` undoes that and uninstalls the distribution unless another profile
still records it. ``list`` shows every bundle of the profile with its source and status.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from pydsh.apps.usage import UsageError
from pydsh.kernel.errors import PydshError

HELP = """\
Usage: pydsh plugin --profile <name> add <requirement>...
       pydsh plugin --profile <name> remove <distribution>...
       pydsh plugin --profile <name> list

Install plugin distributions with this interpreter's pip and add their bundles to a profile.
A requirement is anything pip accepts: a name with a version specifier, a wheel, a URL or a
local directory. pydsh's own plugins are added by name, offline, from the copies pydsh ships:
agent-message and team-models (also spelled dsh-agent-message, @deepseek-ai/dsh-agent-message,
pydsh-agent-message, ...). pip reads its usual configuration (pip.conf, PIP_* environment
variables), e.g. PIP_NO_INDEX=1 to install offline.
"""

ACTIONS = ("add", "remove", "list")
PACKAGE = Path(__file__).resolve().parent.parent
SHIPPED_WHEELS = PACKAGE / "shipped_plugins"
"""Where the pydsh wheel carries the wheels of its own plugin distributions (built by ``plugins/build.py``)."""
CHECKOUT_PLUGINS = PACKAGE.parent / "plugins"
"""The plugin distributions' sources, when pydsh runs from a checkout (an editable install)."""
FIRST_PARTY = {"pydsh-agent-message": "agent-message", "pydsh-team-models": "team-models"}
"""pydsh's own plugin distributions, by the short name they are added by (their directory under ``plugins/``)."""
WATCHED = "web-app"
"""The shipped bundle whose rows include ``profile-watch``: a running process of its profile loads added bundles."""
SPELLINGS = ("@deepseek-ai/dsh-", "pydsh-", "dsh-", "")
"""Prefixes a short name may carry: the reference ecosystem's package names, the distribution's own."""
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_NAMED_REQUIREMENT = re.compile(rf"\s*({_NAME.pattern})\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@(]|$)")


class PluginCommandError(PydshError):
    """One clear message for stderr and the exit code that goes with it."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class PluginCommand:
    profile: str
    action: str
    args: list[str]


def canonical(name: str) -> str:
    """A distribution name compared the way pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(argv: list[str]) -> PluginCommand | None:
    """Parse ``plugin``'s arguments; ``None`` asks for the help text."""
    from pydsh.apps.cli import LAUNCHER

    profile: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--profile" or arg.startswith("--profile="):
            if profile is not None:
                raise UsageError("select a profile only once", LAUNCHER)
            if arg == "--profile":
                value = argv[i + 1] if i + 1 < len(argv) else ""
                i += 1
            else:
                value = arg.partition("=")[2]
            if not value:
                raise UsageError("--profile needs a name", LAUNCHER)
            profile = value
        elif arg in ("-h", "--help"):
            return None
        elif arg.startswith("-"):
            raise PluginCommandError(f"error: unknown option {arg}\n\n{HELP}", 2)
        else:
            rest.append(arg)
        i += 1
    if profile is None:
        raise UsageError("--profile <name> is required", LAUNCHER)
    if not rest or rest[0] not in ACTIONS:
        got = f'unknown action "{rest[0]}"' if rest else "an action is required"
        raise PluginCommandError(f"error: {got} (add, remove or list)\n\n{HELP}", 2)
    action, args = rest[0], rest[1:]
    if action == "list" and args:
        raise PluginCommandError("error: list takes no arguments", 2)
    if action != "list" and not args:
        what = "requirement" if action == "add" else "distribution"
        raise PluginCommandError(f"error: {action} needs at least one {what}", 2)
    return PluginCommand(profile, action, args)


def run_plugin(argv: list[str]) -> int:
    """Entry of ``pydsh plugin ...``; returns the exit code."""
    from pydsh.apps.cli import start_up_failed
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import ProfileError

    try:
        command = parse(argv)
        if command is None:
            print(HELP, end="")
            return 0
        if command.action == "add":
            return add(command.profile, command.args)
        if command.action == "remove":
            return remove(command.profile, command.args)
        return list_bundles(command.profile)
    except PluginCommandError as exc:
        print(exc, file=sys.stderr)
        return exc.exit_code
    except (ProfileError, KernelError) as exc:
        return start_up_failed(exc)


# -- pydsh's own plugin distributions -------------------------------------------------------


def first_party(requirement: str) -> str | None:
    """The first-party distribution ``requirement`` names in any of its spellings (``agent-message``,
    ``dsh-agent-message``, ``@deepseek-ai/dsh-agent-message``, ``pydsh-agent-message``), else ``None``.

    A requirement that names an existing path is a path, whatever it is called.
    """
    if os.path.exists(requirement):
        return None
    name = canonical(requirement.strip())
    shorts = {name.removeprefix(prefix) for prefix in SPELLINGS if name.startswith(prefix)}
    return next((dist for dist, short in FIRST_PARTY.items() if short in shorts), None)


def shipped_requirement(distribution_name: str) -> str:
    """What pip installs for a first-party distribution: the wheel shipped inside pydsh; else, from a
    checkout, the installed copy by name or the source directory; else the name (for an index)."""
    from pydsh.kernel.profiles import is_installed

    wheels = sorted(SHIPPED_WHEELS.glob(f"{distribution_name.replace('-', '_')}-*.whl"))
    if wheels:
        return str(wheels[-1])
    source = CHECKOUT_PLUGINS / FIRST_PARTY[distribution_name]
    if not is_installed(distribution_name) and (source / "pyproject.toml").is_file():
        return str(source)
    return distribution_name


def resolve_requirements(requirements: list[str]) -> list[str]:
    """``requirements`` with each spelling of a first-party plugin replaced by what installs it offline."""
    out = []
    for requirement in requirements:
        dist = first_party(requirement)
        if dist is None:
            out.append(requirement)
            continue
        where = shipped_requirement(dist)
        print(f"pydsh: {requirement} is pydsh's own {dist}: installing {where}", file=sys.stderr)
        out.append(where)
    return out


# -- pip -------------------------------------------------------------------------------------


def require_pip() -> None:
    """Fail with a message naming ``ensurepip`` when this environment has no pip."""
    if find_spec("pip") is None:
        raise PluginCommandError(
            f"error: pip is not installed in this environment ({sys.executable}); "
            "install it with python -m ensurepip and try again",
            1,
        )


def run_pip(args: list[str]) -> int:
    """Run this interpreter's pip with ``args``; its output goes to stderr."""
    require_pip()
    return subprocess.run([sys.executable, "-m", "pip", *args], stdout=2, check=False).returncode


def pip_install(requirements: list[str]) -> list[dict[str, Any]]:
    """Install ``requirements``; returns the ``install`` items of pip's installation report."""
    with tempfile.TemporaryDirectory(prefix="pydsh-pip-") as tmp:
        report = Path(tmp) / "report.json"
        code = run_pip(["install", "--report", str(report), *requirements])
        if code != 0:
            raise PluginCommandError(f"error: pip install failed (exit {code})", 1)
        try:
            items = json.loads(report.read_text(encoding="utf-8")).get("install", [])
        except (OSError, ValueError):
            items = []
    return [item for item in items if isinstance(item, dict)]


def installed_distributions(requirements: list[str], report: list[dict[str, Any]]) -> list[str]:
    """The project names the requirements installed, as their metadata spells them, in order."""
    from importlib import invalidate_caches
    from importlib.metadata import PackageNotFoundError, distribution

    invalidate_caches()
    names: list[str] = []
    for requirement in requirements:
        name = requirement_name(requirement)
        if name is not None:
            names.append(name)
    for item in report:
        metadata = item.get("metadata")
        if item.get("requested") and isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
            names.append(metadata["name"])
    out: dict[str, str] = {}
    for name in names:
        try:
            spelled = str(distribution(name).metadata["Name"])
        except PackageNotFoundError:
            message = f"error: pip installed {name} but it cannot be found in this environment"
            raise PluginCommandError(message, 1) from None
        out.setdefault(canonical(spelled), spelled)
    return list(out.values())


def requirement_name(requirement: str) -> str | None:
    """The project a requirement names by itself (a name, possibly with a specifier, or a wheel file name)."""
    base = requirement.rstrip("/").rsplit("/", 1)[-1]
    if base.endswith(".whl"):
        return base.split("-", 1)[0]
    if "/" in requirement or "://" in requirement or os.path.exists(requirement):
        match = re.match(rf"\s*({_NAME.pattern})\s*@", requirement)
        return match.group(1) if match else None
    match = _NAMED_REQUIREMENT.match(requirement)
    return match.group(1) if match else None


def declared_bundles(distribution_name: str) -> list[str]:
    from importlib.metadata import distribution

    return [ep.name for ep in distribution(distribution_name).entry_points if ep.group == "pydsh.bundles"]


# -- profile.yml -----------------------------------------------------------------------------


@contextmanager
def profile_lock(directory: Path) -> Iterator[None]:
    """Serialise read-modify-write of one profile between concurrent ``pydsh plugin`` runs."""
    import fcntl

    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def raw_profile(directory: Path) -> dict[str, Any]:
    """``profile.yml`` as a mapping (validated), keeping keys pydsh does not use."""
    from pydsh.kernel.compose import read_yaml_file
    from pydsh.kernel.profiles import read_profile

    read_profile(directory)
    raw = read_yaml_file(directory / "profile.yml")
    assert isinstance(raw, dict)
    return raw


def write_profile(directory: Path, data: dict[str, Any]) -> None:
    """Replace ``profile.yml`` atomically: the old file stays whole until the new one is complete."""
    import yaml

    path = directory / "profile.yml"
    if not data.get("plugins"):
        data.pop("plugins", None)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True)
    fd, tmp = tempfile.mkstemp(prefix=".profile.yml.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def recorded(plugins: dict[str, Any], distribution_name: str) -> str | None:
    """The key under which ``plugins`` records ``distribution_name`` (names compare canonically)."""
    return next((key for key in plugins if canonical(str(key)) == canonical(distribution_name)), None)


# -- add -------------------------------------------------------------------------------------


def add(profile: str, requirements: list[str]) -> int:
    """Install ``requirements`` and add the bundles they declare to ``profile``."""
    from pydsh.kernel.profiles import ensure_profile

    directory = ensure_profile(profile)
    raw_profile(directory)
    resolved = resolve_requirements(requirements)
    report = pip_install(resolved)
    distributions = installed_distributions(resolved, report)
    if not distributions:
        raise PluginCommandError(f"error: cannot tell which distribution {' '.join(requirements)} installed", 1)
    wanted: dict[str, list[str]] = {}
    for dist in distributions:
        bundles = declared_bundles(dist)
        if bundles:
            wanted[dist] = bundles
        else:
            print(
                f'pydsh: warning: {dist} declares no pydsh.bundles entry point; profile "{profile}" is unchanged',
                file=sys.stderr,
            )
    if not wanted:
        return 0
    with profile_lock(directory):
        data = raw_profile(directory)
        _check_clashes(profile, data.get("plugins") or {}, wanted)
        _record(data, wanted)
        write_profile(directory, data)
    when = (
        "a running pydsh web loads it at once if its plugins allow it, else it takes effect at the next start"
        if WATCHED in data["bundles"]
        else "it takes effect at the next start"
    )
    for dist, bundles in wanted.items():
        names = ", ".join(f'"{b}"' for b in bundles)
        print(f'added bundle {names} of {dist} to profile "{profile}"; {when}')
    check_composes(profile)
    return 0


def _check_clashes(profile: str, plugins: dict[str, Any], wanted: dict[str, list[str]]) -> None:
    """Refuse bundle names that are paths, that shadow a shipped bundle or that another distribution owns."""
    from pydsh.kernel.compose import SHIPPED
    from pydsh.kernel.profiles import INVALID_BUNDLE_NAME, valid_bundle_name

    for dist, bundles in wanted.items():
        others = {
            b: str(d) for d, names in plugins.items() if canonical(str(d)) != canonical(dist) for b in names or ()
        }
        for bundle in bundles:
            if not valid_bundle_name(bundle):
                problem = f"is {INVALID_BUNDLE_NAME}"
            elif (SHIPPED / f"{bundle}.yml").is_file():
                problem = "is the name of a shipped bundle"
            elif bundle in others:
                problem = f"is already recorded for {others[bundle]}"
            else:
                continue
            raise PluginCommandError(
                f'error: bundle {json.dumps(bundle)} of {dist} {problem}; profile "{profile}" is unchanged '
                "(the package stays installed)",
                2,
            )


def _record(data: dict[str, Any], wanted: dict[str, list[str]]) -> None:
    """Append the new bundles to ``bundles`` and record them under ``plugins``."""
    bundles: list[str] = list(data.get("bundles") or [])
    plugins: dict[str, Any] = dict(data.get("plugins") or {})
    for dist, names in wanted.items():
        key = recorded(plugins, dist)
        stale = set(plugins.pop(key) or []) - set(names) if key is not None else set()
        bundles = [b for b in bundles if b not in stale]
        bundles += [b for b in names if b not in bundles]
        plugins[dist] = list(names)
    data["bundles"] = bundles
    data["plugins"] = plugins


def check_composes(profile: str) -> None:
    """Compose the profile in a fresh interpreter, as its next start will, and pass its warnings on."""
    result = subprocess.run(
        [sys.executable, "-m", "pydsh", "--profile", profile, "--dump-config"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        print(f'pydsh: warning: profile "{profile}" does not compose (exit {result.returncode})', file=sys.stderr)


# -- remove ----------------------------------------------------------------------------------


def remove(profile: str, distributions: list[str]) -> int:
    """Drop the distributions' bundles from ``profile`` and uninstall what no other profile records."""
    from pydsh.kernel.profiles import ensure_profile

    directory = ensure_profile(profile)
    with profile_lock(directory):
        data = raw_profile(directory)
        plugins: dict[str, Any] = dict(data.get("plugins") or {})
        keys = []
        for dist in (first_party(name) or name for name in distributions):
            key = recorded(plugins, dist)
            if key is None:
                listed = ", ".join(str(k) for k in plugins) or "none"
                raise PluginCommandError(
                    f'error: {dist} is not recorded for profile "{profile}" (recorded: {listed}); nothing was changed',
                    2,
                )
            keys.append(key)
        uninstall = [key for key in keys if not _still_recorded(profile, key)]
        if uninstall:
            require_pip()
        dropped = {b for key in keys for b in (plugins.pop(key) or [])}
        data["bundles"] = [b for b in data.get("bundles") or [] if b not in dropped]
        data["plugins"] = plugins
        write_profile(directory, data)
    for key in keys:
        print(f'removed {key} from profile "{profile}"')
    for key in keys:
        if key not in uninstall:
            others = ", ".join(f'"{p}"' for p in _profiles_recording(key, exclude=profile))
            print(f"{key} is still recorded for profile {others}; the package stays installed")
    if not uninstall:
        return 0
    code = run_pip(["uninstall", "-y", *uninstall])
    if code != 0:
        print(f"error: pip uninstall failed (exit {code}); {', '.join(uninstall)} stays installed", file=sys.stderr)
        return 1
    return 0


def _profiles_recording(distribution_name: str, exclude: str) -> list[str]:
    from pydsh.kernel.compose import dsh_home
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.profiles import read_profile

    found = []
    for path in sorted((dsh_home() / "profiles").glob("*/profile.yml")):
        if path.parent.name == exclude:
            continue
        try:
            plugins = read_profile(path.parent)["plugins"]
        except KernelError:
            continue
        if recorded(plugins, distribution_name) is not None:
            found.append(path.parent.name)
    return found


def _still_recorded(profile: str, distribution_name: str) -> bool:
    return bool(_profiles_recording(distribution_name, exclude=profile))


# -- list ------------------------------------------------------------------------------------


def list_bundles(profile: str) -> int:
    """Print ``<bundle>  <source>  <status>`` for every bundle of the profile, in order."""
    from pydsh.kernel.profiles import compose_bundles, ensure_profile, read_profile, valid_bundle_name

    info = read_profile(ensure_profile(profile))
    _comp, uses = compose_bundles(profile, info["bundles"], info["plugins"])
    for bundle, use in zip(info["bundles"], uses, strict=True):
        status = "missing" if use.missing else f"broken: {use.problem}" if use.problem else "ok"
        shown = bundle if valid_bundle_name(bundle) else json.dumps(bundle)
        print(f"{shown}  {use.source}  {status}")
    return 0
