"""Every third-party module pydsh imports comes from a dependency ``pyproject.toml`` declares.

A module installed by hand on a developer's machine (an "optional accelerator" behind ``try: import``)
type-checks and runs there, then fails ``mypy`` or behaves differently on a fresh machine.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(package: Path) -> dict[str, str]:
    """Top-level names of every absolute import below ``package``, with one file that imports each."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], str(path.relative_to(package.parent)))
    return found


def declared_distributions(pyproject: Path) -> set[str]:
    """Normalised names of the dependencies and extras a ``pyproject.toml`` declares."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", ()))
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return {normalise(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in requirements}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def undeclared_imports(package: Path, declared: set[str]) -> list[str]:
    """Third-party modules ``package`` imports that no distribution in ``declared`` provides."""
    providers = importlib.metadata.packages_distributions()
    undeclared = []
    for module, where in sorted(imported_modules(package).items()):
        if module in sys.stdlib_module_names or module == "__future__" or module.partition("_")[0] == "pydsh":
            continue
        owners = {normalise(d) for d in providers.get(module, ())}
        if not owners & declared:
            undeclared.append(f"{module} (imported by {where}; provided by {sorted(owners) or 'nothing installed'})")
    return undeclared


def test_every_third_party_import_is_declared() -> None:
    assert undeclared_imports(ROOT / "pydsh", declared_distributions(ROOT / "pyproject.toml")) == []


def test_every_plugin_distribution_declares_its_imports() -> None:
    """A plugin may use what pydsh declares (it depends on pydsh) and what its own pyproject adds."""
    core = declared_distributions(ROOT / "pyproject.toml")
    for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        declared = core | declared_distributions(pyproject)
        for package in sorted(pyproject.parent.glob("pydsh_*/__init__.py")):
            assert undeclared_imports(package.parent, declared) == [], pyproject


def test_the_checker_sees_an_undeclared_import(tmp_path: Path) -> None:
    """The check above can fail: an optional import guarded by ``try`` is still an import."""
    (tmp_path / "accelerated.py").write_text("try:\n    import orjson\nexcept ImportError:\n    orjson = None\n")
    assert imported_modules(tmp_path).keys() == {"orjson"}
