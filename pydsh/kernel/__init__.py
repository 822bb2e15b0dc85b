"""The kernel: context, services, typed events, scopes, effects and plugin loading."""

from pydsh.kernel.cancel import AbortController, AbortError, AbortSignal
from pydsh.kernel.context import Context
from pydsh.kernel.errors import KernelError
from pydsh.kernel.host import Kernel
from pydsh.kernel.scope import Scope, create_scope

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
