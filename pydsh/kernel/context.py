"""Context: service locator, event bus front and effect owner (spec 01 §3).

A context belongs to one fiber (whose effect stack receives every registration made through
it), may carry a scope tag, and resolves each service name through a realm. Child contexts
made with :meth:`Context.child` / :meth:`Context.isolate` share the fiber.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, Unpack, cast, overload

from pydsh.kernel.errors import KernelError
from pydsh.kernel.events import Bail, Emit, Event, EventBus, Listener, Next, Parallel, Serial, Waterfall
from pydsh.kernel.fiber import Disposer, Fiber, async_teardown_of, teardown_of
from pydsh.kernel.keys import ServiceKey
from pydsh.kernel.scope import ScopeTree

if TYPE_CHECKING:
    from pydsh.kernel.plugin import Loader

T = TypeVar("T")
R = TypeVar("R")
Ts = TypeVarTuple("Ts")


class Realm:
    """A table ``name -> service`` whose changes are reported to the loader."""

    __slots__ = ("_services", "_on_change", "owners")

    def __init__(self, on_change: Callable[[Realm, str], None]) -> None:
        self._services: dict[str, object] = {}
        self._on_change = on_change
        self.owners: dict[str, Fiber] = {}
        """The fiber that provided each service, for audits of who publishes what."""

    def get(self, name: str) -> object | None:
        return self._services.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._services

    def set(self, name: str, value: object) -> None:
        self._services[name] = value
        self._on_change(self, name)

    def discard(self, name: str, value: object) -> None:
        if self._services.get(name) is value:
            del self._services[name]
            self.owners.pop(name, None)
            self._on_change(self, name)

    def names(self) -> list[str]:
        return list(self._services)


SERVICE_PROVIDED: Bail[str, Realm, Fiber, None] = Bail(
    "kernel/service-provided", "after a service is provided; a listener's raise fails the provider (audits)"
)


class Runtime:
    """Process-wide kernel state shared by every context of one composition."""

    def __init__(self) -> None:
        from pydsh.kernel.plugin import Loader

        self.scopes = ScopeTree()
        self.bus = EventBus(self.scopes)
        self.loader: Loader = Loader(self)
        self.root_realm = Realm(self.loader.service_changed)


class Context:
    """What a plugin receives: services, events, effects and its scope tag."""

    __slots__ = ("runtime", "fiber", "scope", "_realms", "_labels")

    def __init__(
        self,
        runtime: Runtime,
        fiber: Fiber,
        *,
        scope: object | None = None,
        realms: dict[str, Realm] | None = None,
    ) -> None:
        self.runtime = runtime
        self.fiber = fiber
        self.scope = scope
        self._realms: dict[str, Realm] = realms or {}
        self._labels: dict[tuple[str, str], Realm] | None = None

    def __repr__(self) -> str:
        return f"<Context fiber={self.fiber.row_id} scope={self.scope!r}>"

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger(f"pydsh.plugin.{self.fiber.plugin_name}")

    # -- services -------------------------------------------------------------------------

    def realm_of(self, name: str) -> Realm:
        return self._realms.get(name) or self.runtime.root_realm

    def get(self, key: ServiceKey[T]) -> T | None:
        """The service ``key`` names in this context's realm, or ``None`` while no plugin provides it."""
        return cast("T | None", self.realm_of(key.name).get(key.name))

    def require(self, key: ServiceKey[T]) -> T:
        """The service ``key`` names; ``KernelError(MISSING_SERVICE)`` while no plugin provides it."""
        value = self.realm_of(key.name).get(key.name)
        if value is None:
            raise KernelError("MISSING_SERVICE", key.name)
        return cast("T", value)

    def provide(self, key: ServiceKey[T], value: T) -> Disposer:
        """Publish ``value`` under ``key`` for as long as this fiber lives (the registration is an effect)."""
        name = key.name
        realm = self.realm_of(name)
        if name in realm:
            raise KernelError("DUPLICATE_SERVICE", name)
        if not self.fiber.accepts_effects:
            raise KernelError("INACTIVE_EFFECT", f"fiber {self.fiber.row_id} is {self.fiber.state}")
        realm.owners[name] = self.fiber
        realm.set(name, value)
        disposer = self.fiber.push(lambda: realm.discard(name, value))
        if self.runtime.bus.has_listeners(SERVICE_PROVIDED):
            self.runtime.bus.bail(SERVICE_PROVIDED, name, realm, self.fiber)
        return disposer

    # -- derived contexts -----------------------------------------------------------------

    def child(self, fiber: Fiber, *, scope: object | None = None) -> Context:
        """A context for ``fiber`` seeing the same realms (scope tag inherited unless given)."""
        ctx = Context(
            self.runtime,
            fiber,
            scope=self.scope if scope is None else scope,
            realms=self._realms,
        )
        fiber.ctx = ctx
        return ctx

    def isolate(self, name: str, label: str | None = None) -> Context:
        """A child context in which ``name`` resolves to a fresh realm (shared per label)."""
        if label is None:
            realm = Realm(self.runtime.loader.service_changed)
        else:
            if self._labels is None:
                self._labels = {}
            realm = self._labels.get((name, label)) or Realm(self.runtime.loader.service_changed)
            self._labels[(name, label)] = realm
        return Context(
            self.runtime,
            self.fiber,
            scope=self.scope,
            realms={**self._realms, name: realm},
        )

    # -- effects --------------------------------------------------------------------------

    def effect(self, execute: Callable[[], object], label: str = "") -> Disposer:
        """Run ``execute`` now and push what it returned as this fiber's teardown."""
        if not self.fiber.accepts_effects:
            raise KernelError("INACTIVE_EFFECT", f"{label or 'effect'} on {self.fiber.state} fiber")
        teardown = teardown_of(execute())
        return self.fiber.push(teardown or _noop)

    async def async_effect(self, execute: Callable[[], object], label: str = "") -> Disposer:
        """Like :meth:`effect` but also accepts awaitables and async generators/managers."""
        if not self.fiber.accepts_effects:
            raise KernelError("INACTIVE_EFFECT", f"{label or 'effect'} on {self.fiber.state} fiber")
        teardown = await async_teardown_of(execute())
        return self.fiber.push(teardown or _noop)

    def register(self, remove: Callable[[], Any]) -> Disposer:
        """Push an already-made registration's remover onto this fiber's stack."""
        return self.fiber.push(remove)

    async def inject(self, deps: Iterable[ServiceKey[Any]], callback: Callable[[Context], Any]) -> Fiber:
        """Run ``callback`` as a sub-fiber while every service in ``deps`` exists."""
        return await self.runtime.loader.inject(self, tuple(key.name for key in deps), callback)

    # -- events ---------------------------------------------------------------------------

    @overload
    def on(
        self,
        event: Emit[*Ts] | Parallel[*Ts],
        listener: Callable[[Unpack[Ts]], object],
        *,
        name: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
        global_: bool = False,
    ) -> Disposer: ...

    @overload
    def on(
        self,
        event: Serial[*Ts, R],
        listener: Callable[[Unpack[Ts]], R | Awaitable[R | None] | None],
        *,
        name: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
        global_: bool = False,
    ) -> Disposer: ...

    @overload
    def on(
        self,
        event: Bail[*Ts, R],
        listener: Callable[[Unpack[Ts]], R | None],
        *,
        name: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
        global_: bool = False,
    ) -> Disposer: ...

    @overload
    def on(
        self,
        event: Waterfall[T, R],
        listener: Callable[[T, Next[R]], Awaitable[R]],
        *,
        name: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
        global_: bool = False,
    ) -> Disposer: ...

    def on(
        self,
        event: Event,
        listener: Callable[..., Any],
        *,
        name: str | None = None,
        before: Iterable[str] = (),
        after: Iterable[str] = (),
        global_: bool = False,
    ) -> Disposer:
        """Listen to ``event`` for as long as this fiber lives.

        ``name`` (default: this plugin's row id) is what other listeners' ``before``/``after`` and the
        event's declared ``order`` refer to; a contradictory order raises ``KernelError(EVENT_ORDER)``.
        """
        if not self.fiber.accepts_effects:
            raise KernelError("INACTIVE_EFFECT", f"listener for {event.name} on {self.fiber.state} fiber")
        entry = Listener(listener, self.scope, global_, name or self.fiber.row_id, tuple(before), tuple(after))
        remove = self.runtime.bus.add(event, entry)
        return self.fiber.push(remove)

    def emit(self, event: Emit[*Ts], *args: *Ts, scope: object | None = None) -> None:
        self.runtime.bus.emit(event, *args, scope=scope)

    async def parallel(self, event: Parallel[*Ts], *args: *Ts, scope: object | None = None) -> None:
        await self.runtime.bus.parallel(event, *args, scope=scope)

    async def serial(self, event: Serial[*Ts, R], *args: *Ts, scope: object | None = None) -> R | None:
        return await self.runtime.bus.serial(event, *args, scope=scope)

    def bail(self, event: Bail[*Ts, R], *args: *Ts, scope: object | None = None) -> R | None:
        return self.runtime.bus.bail(event, *args, scope=scope)

    async def waterfall(
        self,
        event: Waterfall[T, R],
        payload: T,
        default: Callable[[], R | Awaitable[R]],
        *,
        scope: object | None = None,
    ) -> R:
        return await self.runtime.bus.waterfall(event, payload, default, scope=scope)

    def has_listeners(self, event: Event) -> bool:
        return self.runtime.bus.has_listeners(event)


def _noop() -> None:
    return None
