"""Typed names: a service is looked up by the :class:`ServiceKey` its provider declares, so mypy and an
editor know what ``ctx.require(LLM)`` returns, and a misspelt key or method fails type checking.

Each package declares the keys of the services it provides in its own ``keys`` module (cheap to
import: keys, not the services behind them). The kernel's own are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar

if TYPE_CHECKING:
    from pydsh.kernel.invariants import Invariants

T = TypeVar("T")


class ServiceKey(Generic[T]):
    """The typed name of a service: a provider provides ``T`` under it, consumers get ``T`` back."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ServiceKey({self.name!r})"


AnyKey = ServiceKey[Any]


class HostInfo(TypedDict):
    """Which profile the process runs and where its directory is (for plugins that keep files there)."""

    profile: str
    profile_dir: str


HOST_INFO: ServiceKey[HostInfo] = ServiceKey("host_info")
INVARIANTS: ServiceKey[Invariants] = ServiceKey("invariants")
