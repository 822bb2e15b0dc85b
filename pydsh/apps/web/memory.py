"""Giving freed memory back to the system (spec 12 C7: idle RSS ≤ 100 MB).

A long session's full read or a 5 MB answer leaves megabytes of freed blocks inside the C allocator: glibc
raises its mmap threshold after a big block is freed (so later big strings come from the heap and stay there)
and keeps freed heap pages mapped. :func:`tune` pins the threshold, so each big string is its own mapping and
goes back when freed; :func:`trim` hands the free pages of every heap back once a big structure is dropped.
Both do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from functools import cache
from typing import Any

from pydsh.host import collector

log = logging.getLogger("pydsh.web")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 1024
"""Blocks from this size on are mapped on their own (glibc's default start, pinned instead of growing)."""
TRIM_THRESHOLD = 1024 * 1024
"""Free memory at the top of a heap beyond this goes back to the system at once."""


@cache
def _glibc() -> Any:
    """glibc's handle, else ``None`` (another C library, or none found)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 - present in glibc only
        return libc
    except (OSError, AttributeError):
        return None


def tune() -> bool:
    """Pin the mmap and trim thresholds (once, at the server's start); whether glibc took them."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def trim() -> None:
    """Return the free pages of every heap to the system (after dropping something big)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def collect() -> None:
    """Free what a closed session left in reference cycles (its agent, scopes and contexts refer to each
    other, about 10 MB after a 5 MB answer) and hand the pages back; a full collection takes tens of ms,
    so it runs after a session is let go, not after every turn."""
    collector.collect()
    trim()
