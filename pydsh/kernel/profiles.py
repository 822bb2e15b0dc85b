"""Profiles under ``$DSH_HOME/profiles/<name>/`` and the layer order that composes them.

A profile names its bundles in ``profile.yml`` and holds the user's own ``patch.yml`` (and, in a home
shared with DeepSeek Harness, that runtime's ``cordis.patch.yml``, applied as it applies it). Missing
profiles are materialised from the templates shipped in the package (spec 01 §11.5). Bundles of
third-party distributions degrade alone: one warning, the rest composes (spec 01 §15.3).
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydsh.kernel.compose import SHIPPED, Composition, dsh_home, fail, load_yaml, note_read, read_yaml_file
from pydsh.kernel.errors import KernelError, PydshError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

TEMPLATES = SHIPPED / "templates"
PLUGIN_BUNDLE = "plugin bundle"
"""Layer label of a third-party distribution's bundle: its rows fail alone (spec 01 §15.3)."""
BUNDLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
INVALID_BUNDLE_NAME = 'not a valid bundle name (letters, digits, ".", "_" and "-", starting with a letter or digit)'


class ProfileError(PydshError):
    """A profile cannot be selected; ``exit_code`` is what the launcher exits with."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def known_templates() -> list[str]:
    return sorted(p.stem for p in TEMPLATES.glob("*.yml"))


def private_dir(path: Path) -> None:
    """Create ``path`` and its missing parents mode 0700 whatever the umask (spec 01 §11.5, 02 §9.4).

    Directories that already exist are the user's and keep their mode.
    """
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)


def profile_dir(name: str) -> Path:
    return dsh_home() / "profiles" / name


def ensure_profile(name: str) -> Path:
    """The profile directory, materialised from its shipped template when missing."""
    directory = profile_dir(_checked_name(name))
    if (directory / "profile.yml").is_file():
        return directory
    template = TEMPLATES / f"{name}.yml"
    if not template.is_file():
        known = ", ".join(known_templates())
        raise ProfileError(f'error: unknown profile "{name}" (known templates: {known})')
    private_dir(directory)
    _write_new(directory / "profile.yml", template.read_text(encoding="utf-8"))
    _write_new(directory / "patch.yml", "[]\n")
    return directory


def reset_profile(name: str, template: str) -> list[Path]:
    """Replace profile ``name`` with a fresh copy of shipped template ``template`` (``--from-default-profile``).

    The replaced ``profile.yml`` and ``patch.yml`` are kept beside the new ones as ``*.bak``
    (replacing older backups), so the user's own layer is never lost; returns those backups.
    """
    source = TEMPLATES / f"{template}.yml"
    if not valid_bundle_name(template) or not source.is_file():
        known = ", ".join(known_templates())
        raise ProfileError(f'error: unknown default profile "{template}" (known templates: {known})')
    directory = profile_dir(_checked_name(name))
    private_dir(directory)
    kept = []
    for file_name, text in (("profile.yml", source.read_text(encoding="utf-8")), ("patch.yml", "[]\n")):
        path = directory / file_name
        if path.is_file():
            backup = path.with_name(f"{file_name}.bak")
            os.replace(path, backup)
            kept.append(backup)
        _write_new(path, text)
    return kept


def _checked_name(name: str) -> str:
    """``name`` when it can name a profile directory; otherwise the one-line error."""
    if not name or "/" in name or name in (".", ".."):
        raise ProfileError(f'error: invalid profile name "{name}"')
    return name


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` atomically unless another process already did."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def read_profile(directory: Path) -> dict[str, Any]:
    path = directory / "profile.yml"
    raw = read_yaml_file(path)
    if not isinstance(raw, dict):
        raise fail(str(path), "profile.yml must be a mapping with a bundles list")
    bundles = raw.get("bundles", [])
    if not isinstance(bundles, list) or not all(isinstance(b, str) for b in bundles):
        raise fail(str(path), "bundles must be a list of bundle names")
    plugins = raw.get("plugins") or {}
    if not isinstance(plugins, dict):
        raise fail(str(path), "plugins must map distributions to their bundles")
    return {"bundles": bundles, "plugins": plugins, "description": raw.get("description")}


def bundle_entry_points() -> dict[str, EntryPoint]:
    """The ``pydsh.bundles`` entry points of the installed distributions, by bundle name."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="pydsh.bundles")}


def distribution_label(name: str) -> str:
    """``<distribution> <version>`` when installed, else the bare name."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return name


def is_installed(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


def valid_bundle_name(name: str) -> bool:
    """Whether ``name`` can name a bundle: a bundle is looked up as ``<name>.yml``, so a path never can."""
    return BUNDLE_NAME.fullmatch(name) is not None


def recorded_owner(bundle: str, plugins: dict[str, Any]) -> str | None:
    """The distribution ``profile.yml`` records as providing ``bundle``."""
    return next((str(d) for d, names in plugins.items() if bundle in (names or [])), None)


def package_dir(package: str, resource: str) -> Path:
    """The directory of ``package`` that holds ``resource``, found without importing (running) it."""
    from importlib.machinery import PathFinder
    from importlib.util import find_spec

    top, *rest = package.split(".")
    spec = find_spec(top)
    for part in rest:
        if spec is None or not spec.submodule_search_locations:
            break
        spec = PathFinder.find_spec(part, list(spec.submodule_search_locations))
    locations = [] if spec is None else list(spec.submodule_search_locations or [])
    for location in locations:
        if (Path(location) / resource).is_file():
            return Path(location)
    if not locations:
        raise FileNotFoundError(f"package {package} is not importable")
    raise FileNotFoundError(f"{resource} is not in package {package}")


class OutsidePackage(PydshError, ValueError):
    """A distribution's bundle file resolves outside its package (a ``..`` path, an absolute path, a symlink)."""


def bundle_file(package: str, resource: str) -> Path:
    """The file ``resource`` of ``package``, refused unless it resolves inside the package's directory."""
    directory = package_dir(package, resource)
    path = (directory / resource).resolve()
    if not path.is_relative_to(directory.resolve()):
        raise OutsidePackage(resource)
    return path


@dataclass(frozen=True)
class BundleUse:
    """What became of one listed bundle: where it comes from and why it was skipped ("" = used)."""

    source: str
    problem: str = ""
    missing: bool = False


def _plugin_bundle_ops(name: str, ep: EntryPoint, label: str) -> tuple[list[Any] | None, str]:
    """Read a distribution's bundle file; ``(None, reason)`` when it cannot be used."""
    package, _, resource = ep.value.partition(":")
    try:
        text = bundle_file(package.strip(), resource.strip()).read_text(encoding="utf-8")
    except OutsidePackage:
        return None, (
            f"distribution {label}: its bundle file {ep.value} is outside package {package.strip()}; "
            "nothing outside a distribution's package is read"
        )
    except (ImportError, OSError, ValueError) as exc:
        return None, f"distribution {label}: its bundle file {ep.value} cannot be read ({exc})"
    try:
        ops = load_yaml(text, ep.value)
    except KernelError as exc:
        return None, f"distribution {label}: {exc.detail}"
    if not isinstance(ops, list):
        return None, f"distribution {label}: {ep.value} is not a list of patch operations"
    return ops, ""


def apply_plugin_bundle(
    comp: Composition, name: str, plugins: dict[str, Any], profile: str, eps: dict[str, EntryPoint]
) -> BundleUse:
    """Apply a distribution's bundle to ``comp``; a bundle that cannot be used leaves ``comp`` as it was."""
    owner = recorded_owner(name, plugins)
    ep = eps.get(name)
    if ep is None:
        if owner is None:
            return BundleUse("-", "no shipped bundle or installed distribution provides it", missing=True)
        if not is_installed(owner):
            return BundleUse(
                owner,
                f"distribution {owner} is not installed (reinstall it, or run "
                f"pydsh plugin --profile {profile} remove {owner})",
                missing=True,
            )
        label = distribution_label(owner)
        return BundleUse(
            label,
            f"distribution {label} declares no pydsh.bundles entry point named {name} "
            f"(run pydsh plugin --profile {profile} remove {owner})",
        )
    label = distribution_label(ep.dist.name) if ep.dist is not None else "(unknown distribution)"
    ops, reason = _plugin_bundle_ops(name, ep, label)
    if ops is None:
        return BundleUse(label, reason)
    before = copy.deepcopy(comp.rows)
    try:
        comp.apply_patch(ops, f"{PLUGIN_BUNDLE} {name} (distribution {label})")
    except KernelError as exc:
        comp.rows = before
        return BundleUse(label, exc.detail)
    return BundleUse(label)


def compose_bundles(name: str, bundles: list[str], plugins: dict[str, Any]) -> tuple[Composition, list[BundleUse]]:
    """Apply ``bundles`` in order: shipped ones strictly, a distribution's alone (spec 01 §15.3)."""
    directory = profile_dir(name)
    comp = Composition()
    uses: list[BundleUse] = []
    eps: dict[str, EntryPoint] | None = None
    for bundle in bundles:
        if not valid_bundle_name(bundle):
            owner = recorded_owner(bundle, plugins) or "-"
            comp.warnings.append(f"bundle {json.dumps(bundle)} skipped: {INVALID_BUNDLE_NAME}; nothing was read for it")
            uses.append(BundleUse(owner, INVALID_BUNDLE_NAME))
            continue
        if (SHIPPED / f"{bundle}.yml").is_file():
            ops = comp.includes.bundle_ops(bundle, str(directory / "profile.yml"))
            comp.apply_patch(ops, f"bundle {bundle}")
            uses.append(BundleUse("shipped"))
            continue
        if eps is None:
            eps = bundle_entry_points()
        use = apply_plugin_bundle(comp, bundle, plugins, name, eps)
        if use.problem:
            comp.warnings.append(f'bundle "{bundle}" skipped: {use.problem}')
        uses.append(use)
    return comp, uses


REFERENCE_PATCH = "cordis.patch.yml"
"""DeepSeek Harness's patch layer, in a profile directory and in the home (read as a pydsh patch layer)."""


def user_layers(directory: Path) -> list[Path]:
    """The user's patch files of profile ``directory``, in the order they apply (after its bundles).

    DeepSeek Harness applies its profile's ``cordis.patch.yml``, then the home's, then ``--patch``
    files; pydsh's own ``patch.yml`` of each place applies right after the reference's file there, so
    a home shared by both runtimes composes alike in both and pydsh's layers have the last word.
    """
    home = dsh_home()
    return [directory / REFERENCE_PATCH, directory / "patch.yml", home / REFERENCE_PATCH, home / "patch.yml"]


def compose_profile(name: str, patches: list[str], extra_bundles: tuple[str, ...] = ()) -> Composition:
    """Compose profile ``name``: bundles, profile patch, home patch, then ``--patch`` files.

    A composition made only of files (no third-party bundle) is cached until one of them changes.
    """
    from pydsh.kernel import composed_cache

    directory = ensure_profile(name)
    request = composed_cache.request(name, patches, extra_bundles)
    cached = composed_cache.load(request)
    if cached is not None:
        return cached
    with composed_cache.recording() as reads:
        comp, from_files_only = _compose_profile(name, directory, patches, extra_bundles)
    if from_files_only:
        composed_cache.store(request, reads, comp)
    return comp


def compose_default(name: str) -> Composition:
    """Profile ``name`` from its bundles alone, without the user's patch layers (``--dump-default-config``)."""
    profile = read_profile(ensure_profile(name))
    comp, _uses = compose_bundles(name, profile["bundles"], profile["plugins"])
    comp.check_ids()
    return comp


def _compose_profile(
    name: str, directory: Path, patches: list[str], extra_bundles: tuple[str, ...]
) -> tuple[Composition, bool]:
    """The composition, and whether it was made from files alone (no third-party bundle)."""
    profile = read_profile(directory)
    comp, uses = compose_bundles(name, [*profile["bundles"], *extra_bundles], profile["plugins"])
    for path in user_layers(directory):
        if path.is_file():
            comp.apply_patch(read_yaml_file(path) or [], str(path))
        else:
            note_read(path, None)
    for raw in patches:
        path = Path(raw).expanduser()
        comp.apply_patch(read_yaml_file(path.resolve()), str(path))
    comp.check_ids()
    return comp, all(use.source == "shipped" for use in uses)
