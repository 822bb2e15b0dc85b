"""Public names of a package that load their modules on first use (PEP 562), so importing the package stays
as cheap as the start paths that only need one of its submodules."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: a name of ``homes`` is imported from ``package.<its home>``
    (or from the home itself when it is an absolute module name) and kept in ``namespace``."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = home if "." in home else f"{package}.{home}"
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return load
