"""The ``DSH_HOME`` hosts choose: pydsh reads its home from the process environment, so hosts open at the
same time share one, and the previous value returns when the last of them closes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydsh.host.errors import HostError

if TYPE_CHECKING:
    import tempfile


@dataclass
class _Home:
    path: str | None = None
    users: int = 0
    saved: str | None = None
    temporary: tempfile.TemporaryDirectory[str] | None = None


_HOME = _Home()


def lease_home(path: str | None) -> None:
    """Use ``path`` as ``DSH_HOME`` (``None``: the one already chosen, else a new temporary one)."""
    if _HOME.users:
        if path is not None and path != _HOME.path:
            raise HostError(f'another open host uses DSH_HOME "{_HOME.path}"; hosts open at once share one home')
    else:
        if path is None:
            import tempfile

            _HOME.temporary = tempfile.TemporaryDirectory(prefix="pydsh-home-")
            path = _HOME.temporary.name
        _HOME.path, _HOME.saved = path, os.environ.get("DSH_HOME")
        os.environ["DSH_HOME"] = path
    _HOME.users += 1


def release_home() -> None:
    """One host stopped using the home; the last one restores the previous ``DSH_HOME``."""
    _HOME.users -= 1
    if _HOME.users:
        return
    if _HOME.saved is None:
        os.environ.pop("DSH_HOME", None)
    else:
        os.environ["DSH_HOME"] = _HOME.saved
    temporary = _HOME.temporary
    _HOME.path = _HOME.saved = _HOME.temporary = None
    if temporary is not None:
        temporary.cleanup()
