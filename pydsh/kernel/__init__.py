"""The kernel: context, services, typed events, scopes, effects and plugin loading.

The names below load their modules when first used: a submodule such as ``pydsh.kernel.errors`` is
imported on start paths (the terminal's first frame) that need none of the kernel's machinery yet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh import lazy_names

if TYPE_CHECKING:
    from pydsh.kernel.cancel import AbortController, AbortError, AbortSignal
    from pydsh.kernel.context import Context
    from pydsh.kernel.errors import KernelError
    from pydsh.kernel.host import Kernel
    from pydsh.kernel.scope import Scope, create_scope

_HOMES = {
    "AbortController": "cancel",
    "AbortError": "cancel",
    "AbortSignal": "cancel",
    "Context": "context",
    "KernelError": "errors",
    "Kernel": "host",
    "Scope": "scope",
    "create_scope": "scope",
}

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Context",
    "Kernel",
    "KernelError",
    "Scope",
    "create_scope",
]


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name this module is asked for.
    __getattr__ = lazy_names(__name__, _HOMES, globals())
