"""The packages of pydsh form layers: a package imports only packages below it, in any form of import.

The graph is read from the source, so an import inside a function or under ``TYPE_CHECKING`` counts
as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pydsh"

LAYERS = (
    "profiles",
    "kernel",
    "wire",
    "session",
    "llm",
    "contract",
    "agent",
    "policy",
    "mcp_resources",
    "tools",
    "images",
    "compaction",
    "subagents",
    "messaging",
    "teams",
    "schedules",
    "traces",
    "goals",
    "plan",
    "host",
    "batch",
    "apps",
    "sdk",
    "testing",
)
"""Bottom to top (``profiles`` holds only the shipped profile files). The top-level modules
(``pydsh/__init__.py``, ``__main__.py``, ``plugin.py``) sit above them all."""


def package_of(root: Path, path: Path) -> str | None:
    """The layer a source file belongs to (``None`` for the top-level modules)."""
    parts = path.relative_to(root).parts
    return parts[0] if len(parts) > 1 else None


def imported_modules(root: Path, path: Path) -> list[tuple[int, str]]:
    """Every ``pydsh`` module ``path`` imports, wherever the import statement stands."""
    module = ".".join(("pydsh", *path.relative_to(root).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return sorted((line, name) for line, name in found if name == "pydsh" or name.startswith("pydsh."))


def upward_imports(root: Path = ROOT) -> list[str]:
    """``file:line: <package> imports <module>`` for every import of a package at or above the importer's layer."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        source = package_of(root, path)
        if source is None:
            continue
        for line, name in imported_modules(root, path):
            target = name.split(".")[1] if "." in name else None
            if target is None or target == source:
                continue
            if target not in rank or rank[target] > rank[source]:
                problems.append(f"{path.relative_to(root.parent)}:{line}: {source} imports {name}")
    return problems


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(LAYERS)


def test_no_package_imports_one_above_it() -> None:
    assert upward_imports() == []


def test_the_checker_sees_lazy_type_only_and_relative_imports(tmp_path: Path) -> None:
    root = tmp_path / "pydsh"
    (root / "kernel").mkdir(parents=True)
    (root / "kernel" / "probe.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pydsh.agent.registry import AgentRegistry\n"
        "def later() -> None:\n    import pydsh.apps.cli\n"
        "from ..session import keys\n"
        "from pydsh.kernel import events\n"
    )
    (root / "session").mkdir()
    (root / "session" / "log.py").write_text("from pydsh.kernel.events import Emit\nfrom pydsh.shiny import x\n")
    assert upward_imports(root) == [
        "pydsh/kernel/probe.py:3: kernel imports pydsh.agent.registry",
        "pydsh/kernel/probe.py:5: kernel imports pydsh.apps.cli",
        "pydsh/kernel/probe.py:6: kernel imports pydsh.session",
        "pydsh/session/log.py:2: session imports pydsh.shiny",
    ]
