"""Profiles under ``$DSH_HOME/profiles/<name>/`` and the layer order that composes them.

A profile names its bundles in ``profile.yml`` and holds the user's own ``patch.yml``. Missing
profiles are materialised from the templates shipped in the package (spec 01 §11.5). Bundles of
third-party distributions degrade alone: one warning, the rest composes (spec 01 §15.3).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from pydsh.kernel.compose import SHIPPED, Composition, dsh_home, fail, load_yaml, read_yaml_file
from pydsh.kernel.errors import KernelError

TEMPLATES = SHIPPED / "templates"
PLUGIN_BUNDLE = "plugin bundle"
"""Layer label of a third-party distribution's bundle: its rows fail alone (spec 01 §15.3)."""


class ProfileError(Exception):
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
    if not name or "/" in name or name in (".", ".."):
        raise ProfileError(f'error: invalid profile name "{name}"')
    directory = profile_dir(name)
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


def bundle_entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group="pydsh.bundles")}


def _plugin_bundle(name: str, plugins: dict[str, Any], profile: str) -> tuple[list[Any] | None, str]:
    """Read a distribution's bundle; ``(None, reason)`` when it cannot be used."""
    owner = next((d for d, names in plugins.items() if name in (names or [])), None)
    ref = bundle_entry_points().get(name)
    if ref is None:
        if owner is None:
            return None, "no shipped bundle or installed distribution provides it"
        return None, (
            f"distribution {owner} is not installed (reinstall it, or run "
            f"pydsh plugin --profile {profile} remove {owner})"
        )
    package, _, resource = ref.partition(":")
    try:
        from importlib.resources import files

        text = files(package.strip()).joinpath(resource.strip()).read_text(encoding="utf-8")
    except (ImportError, OSError, ValueError) as exc:
        return None, f"its bundle file {ref} cannot be read ({exc})"
    try:
        ops = load_yaml(text, ref)
    except KernelError as exc:
        return None, str(exc)
    if not isinstance(ops, list):
        return None, f"{ref} is not a list of patch operations"
    return ops, ""


def compose_profile(name: str, patches: list[str], extra_bundles: tuple[str, ...] = ()) -> Composition:
    """Compose profile ``name``: bundles, profile patch, home patch, then ``--patch`` files."""
    directory = ensure_profile(name)
    profile = read_profile(directory)
    comp = Composition()
    for bundle in [*profile["bundles"], *extra_bundles]:
        if (SHIPPED / f"{bundle}.yml").is_file():
            ops = comp.includes.bundle_ops(bundle, str(directory / "profile.yml"))
            comp.apply_patch(ops, f"bundle {bundle}")
            continue
        found, reason = _plugin_bundle(bundle, profile["plugins"], name)
        if found is None:
            comp.warnings.append(f'bundle "{bundle}" skipped: {reason}')
            continue
        before = copy.deepcopy(comp.rows)
        try:
            comp.apply_patch(found, f"{PLUGIN_BUNDLE} {bundle}")
        except KernelError as exc:
            comp.rows = before
            comp.warnings.append(f'bundle "{bundle}" skipped: {exc}')
    layers = [directory / "patch.yml", dsh_home() / "patch.yml"]
    for path in layers:
        if path.is_file():
            comp.apply_patch(read_yaml_file(path) or [], str(path))
    for raw in patches:
        path = Path(raw).expanduser()
        comp.apply_patch(read_yaml_file(path.resolve()), str(path))
    comp.check_ids()
    return comp
