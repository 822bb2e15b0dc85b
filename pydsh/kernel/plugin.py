"""Plugins: discovery by name, config validation, inject-gated activation (spec 01 §4, §7, §8).

The :class:`Loader` owns every loadable fiber. A fiber activates once all the services it
injects exist in its realm, is unloaded when one of them disappears, and is reloaded when one
is replaced. Activation failures roll back what the plugin registered and leave the row
``failed`` without stopping unrelated rows.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import types
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydsh.kernel.compose import REFERENCE_PREFIX
from pydsh.kernel.errors import KernelError, PydshError
from pydsh.kernel.fiber import ACTIVE, DISPOSED, DISPOSING, FAILED, LOADING, PENDING, Fiber
from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.kernel.compose import Row
    from pydsh.kernel.context import Context, Realm, Runtime

log = logging.getLogger("pydsh.kernel")

GROUP = "pydsh:group"
GROUP_ALIASES = frozenset({GROUP, "cordis:group"})


class PluginAborted(PydshError):
    """What a row records when its plugin raised a ``BaseException`` such as ``SystemExit`` while starting.

    The row keeps a readable error, and nothing that re-raises a row's error can end the process.
    """


@dataclass(frozen=True)
class PluginInfo:
    """A resolved plugin: what to call and the metadata read from it."""

    name: str
    target: object
    inject: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    config_model: Any = None
    hot_load: bool = False
    """The plugin declares ``hot_load = True``: it may be loaded into a running process (``profile-watch``)."""


_ENTRY_POINTS: dict[str, str] | None = None


def entry_point_table() -> dict[str, str]:
    """``pydsh.plugins`` entry points (name -> value), read once per process (and cached across them)."""
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        from pydsh.kernel.discovery import plugin_entry_points

        _ENTRY_POINTS = plugin_entry_points()
    return _ENTRY_POINTS


def forget_entry_points() -> None:
    """Read the ``pydsh.plugins`` entry points afresh at the next lookup (a distribution was installed)."""
    global _ENTRY_POINTS
    _ENTRY_POINTS = None


def _import_target(ref: str) -> object:
    module_name, _, attr = ref.partition(":")
    obj: object = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def escalates(exc: BaseException) -> bool:
    """Whether ``exc`` must stop more than one row: Ctrl-C, a closing coroutine, or a cancellation of this task.

    Anything else a plugin raises while importing or starting (``SystemExit`` included) fails its row only.
    A ``CancelledError`` counts as a cancellation only when the running task was asked to cancel.
    """
    if isinstance(exc, BaseExceptionGroup) and not isinstance(exc, Exception):
        return any(escalates(inner) for inner in exc.exceptions)
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        return True
    if isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return True
        return task is None or task.cancelling() > 0
    return False


def describe(exc: BaseException) -> str:
    """``Type: message``; a ``SystemExit`` names the exit it attempted, since its message is only the code."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: called sys.exit({'' if exc.code is None else repr(exc.code)})"
    return f"{type(exc).__name__}: {exc}"


def plugin_ref(name: str) -> str | None:
    """What a row ``name`` imports: entry point, reference alias, dotted path (spec 01 §8); ``None`` if nothing."""
    table = entry_point_table()
    ref = table.get(name)
    if ref is None and name.startswith(REFERENCE_PREFIX):
        from pydsh.kernel.reference import canonical

        ref = table.get(canonical(name))
    elif ref is None and ("." in name or ":" in name) and " " not in name:
        ref = name
    return ref


def resolve_plugin(name: str) -> PluginInfo:
    """Resolve a row ``name`` to its target and metadata, importing its module."""
    ref = plugin_ref(name)
    if ref is None:
        raise KernelError("PLUGIN_NOT_FOUND", name)
    try:
        target = _import_target(ref)
    except BaseException as exc:
        if escalates(exc):
            raise
        raise KernelError("PLUGIN_NOT_FOUND", f"{name} ({describe(exc)})") from exc
    if isinstance(target, types.ModuleType) and not hasattr(target, "apply"):
        raise KernelError("PLUGIN_NOT_FOUND", f"{name}: module {target.__name__} has no apply()")
    declared = getattr(target, "name", None)
    return PluginInfo(
        name=declared if isinstance(declared, str) else name,
        target=target,
        inject=service_names(name, getattr(target, "inject", ())),
        optional=service_names(name, getattr(target, "optional", ())),
        config_model=getattr(target, "Config", None),
        hot_load=getattr(target, "hot_load", False) is True,
    )


def service_names(plugin: str, keys: object) -> tuple[str, ...]:
    """The names of a plugin's ``inject`` / ``optional`` service keys; anything but keys is refused."""
    items = tuple(keys) if isinstance(keys, (tuple, list)) else (keys,) if keys else ()
    for key in items:
        if not isinstance(key, ServiceKey):
            detail = f"{plugin}: inject and optional list service keys (pydsh.plugin.ServiceKey), not {key!r}"
            raise KernelError("COMPOSITION_INVALID", detail)
    return tuple(key.name for key in items)


class InvalidConfig(KernelError):
    """``CONFIG_INVALID`` with the locations of the keys the plugin's ``Config`` does not declare."""

    def __init__(self, detail: str, unknown: list[tuple[Any, ...]]) -> None:
        super().__init__("CONFIG_INVALID", detail)
        self.unknown = unknown


def validate_config(
    row_id: str, info: PluginInfo, raw: object, warn: Callable[[str], None] | None = None, origin: str = ""
) -> Any:
    """Validate a row's (already interpolated) config with the plugin's ``Config`` model.

    Keys pydsh does not know but DeepSeek Harness does are renamed or dropped, and on a plugin standing
    for a reference plugin any other unknown key is dropped as the reference drops it; each dropped key
    is reported through ``warn``. ``origin`` names the patch layer that replaced the config, if any.
    """
    try:
        return _validate(row_id, info, raw, origin)
    except InvalidConfig as exc:
        adapted = _reference_adapted(row_id, info, raw, origin, exc)
        if adapted is None:
            raise
    config, notes = adapted
    for note in notes:
        (warn or log.warning)(f'row "{row_id}" ({info.name}): {note}')
    return config


UNKNOWN_KEY_PASSES = 4
"""Validations that may each reveal more unknown keys (a union branch chosen once another key is gone)."""


def _reference_adapted(
    row_id: str, info: PluginInfo, raw: object, origin: str, failure: InvalidConfig
) -> tuple[Any, list[str]] | None:
    """The validated config read as the reference reads it, with one note per key dropped; ``None`` if no
    reference rule applies. A config that still fails raises that failure."""
    if not isinstance(raw, dict):
        return None
    from pydsh.kernel import reference

    renamed = reference.adapt(info.name, raw)
    lenient = reference.reads_leniently(info.name)
    if renamed is None and not (lenient and failure.unknown):
        return None
    config, notes = renamed if renamed is not None else (raw, [])
    for _ in range(UNKNOWN_KEY_PASSES):
        try:
            return _validate(row_id, info, config, origin), notes
        except InvalidConfig as exc:
            config, removed = reference.without(config, exc.unknown) if lenient else (config, [])
            if not removed:
                raise
            notes += [reference.unknown_key_note(location, info.config_model) for location in removed]
    return _validate(row_id, info, config, origin), notes


def _validate(row_id: str, info: PluginInfo, raw: object, origin: str) -> Any:
    model = info.config_model
    if model is None:
        if raw not in (None, {}):
            keys: list[tuple[Any, ...]] = [(key,) for key in raw] if isinstance(raw, dict) else []
            raise InvalidConfig(f'row "{row_id}": plugin {info.name} takes no config', keys)
        return None
    try:
        return model.model_validate({} if raw is None else raw)
    except ValueError as exc:
        from pydantic import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        errors = exc.errors()
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}" for err in errors)
        if origin and any(err["type"] == "missing" for err in errors):
            problems += (
                f" (the config was replaced by {origin}: a patch replaces a row's whole config, "
                "so restate every field the row needs)"
            )
        unknown: list[tuple[Any, ...]] = [tuple(err["loc"]) for err in errors if err["type"] == "extra_forbidden"]
        raise InvalidConfig(f'row "{row_id}" ({info.name}): {problems}', unknown) from None


async def apply_plugin(info: PluginInfo, ctx: Context, config: Any) -> Any:
    """Run one plugin form against ``ctx``; returns the instance for class plugins."""
    target = info.target
    if isinstance(target, type):
        instance = target(ctx, config)
        start = getattr(instance, "start", None)
        if start is not None:
            result = start()
            if inspect.isawaitable(result):
                await result
        return instance
    fn = target.apply if isinstance(target, types.ModuleType) else target
    if not callable(fn):
        raise KernelError("PLUGIN_NOT_FOUND", f"{info.name} is not callable")
    result = fn(ctx, config)
    if inspect.isawaitable(result):
        await result
    return None


@dataclass(eq=False)
class Slot:
    """A loadable fiber: what it waits for and how to (re)start it."""

    fiber: Fiber
    ctx: Context
    deps: tuple[str, ...]
    optional: tuple[str, ...]
    start: Callable[[Context], Awaitable[Any]]
    bound: dict[str, object] = field(default_factory=dict)

    def watched(self) -> tuple[str, ...]:
        return self.deps + self.optional


class Loader:
    """Activates, reloads and unloads fibers as the services they inject come and go."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._slots: dict[Fiber, Slot] = {}
        self._by_dep: dict[str, set[Slot]] = {}
        self._queue: deque[Slot] = deque()
        self._settling: asyncio.Task[None] | None = None
        self._warned: set[str] = set()
        self.failures: list[Fiber] = []

    # -- creating fibers ------------------------------------------------------------------

    def add(
        self,
        parent_ctx: Context,
        fiber: Fiber,
        deps: tuple[str, ...],
        start: Callable[[Context], Awaitable[Any]],
        optional: tuple[str, ...] = (),
    ) -> Slot:
        slot = Slot(fiber, parent_ctx.child(fiber), deps, optional, start)
        self._slots[fiber] = slot
        for name in slot.watched():
            self._by_dep.setdefault(name, set()).add(slot)
        self._queue.append(slot)
        return slot

    def add_row(self, parent_ctx: Context, row: Row) -> Fiber:
        """Create the fiber of one composition row (disabled rows are not loaded)."""
        fiber = Fiber(row.id, row.name, parent_ctx.fiber)
        fiber.source = row.source
        if row.name in GROUP_ALIASES:
            self.add(parent_ctx, fiber, tuple(row.inject), lambda ctx: self._start_group(ctx, row))
            return fiber
        try:
            info = resolve_plugin(row.name)
        except KernelError as exc:
            self._fail(fiber, exc)
            return fiber
        deps = tuple(dict.fromkeys((*info.inject, *row.inject)))
        self.add(parent_ctx, fiber, deps, lambda ctx: self._start_row(ctx, row, info), info.optional)
        return fiber

    async def _start_row(self, ctx: Context, row: Row, info: PluginInfo) -> None:
        config = validate_config(row.id, info, row.config, self._warn_once, row.config_source)
        ctx.fiber.config = config
        ctx.fiber.instance = await apply_plugin(info, ctx, config)

    async def _start_group(self, ctx: Context, row: Row) -> None:
        for name, label in (row.isolate or {}).items():
            ctx = ctx.isolate(name, None if label is True else str(label))
        self.add_rows(ctx, row.children)

    def add_rows(self, parent_ctx: Context, rows: list[Row]) -> None:
        """Add each enabled row; a DeepSeek Harness row pydsh has no plugin for is skipped with a warning."""
        for row in rows:
            if row.disabled is True:
                continue
            if row.name.startswith(REFERENCE_PREFIX) and plugin_ref(row.name) is None:
                from pydsh.kernel.reference import skip_warning

                self._warn_once(skip_warning(row.id, row.name))
                continue
            self.add_row(parent_ctx, row)

    def _warn_once(self, text: str) -> None:
        """Log ``text`` as a warning the first time this loader meets it (rows reload)."""
        if text not in self._warned:
            self._warned.add(text)
            log.warning("%s", text)

    async def inject(self, parent_ctx: Context, deps: tuple[str, ...], callback: Callable[[Context], Any]) -> Fiber:
        fiber = Fiber(f"{parent_ctx.fiber.row_id}/inject", parent_ctx.fiber.plugin_name, parent_ctx.fiber)

        async def start(ctx: Context) -> None:
            result = callback(ctx)
            if inspect.isawaitable(result):
                await result

        self.add(parent_ctx, fiber, deps, start)
        await self.settle()
        return fiber

    @property
    def idle(self) -> bool:
        """Nothing is queued or activating: every fiber's state is settled."""
        return not self._queue and self._settling is None

    def missing_services(self, fiber: Fiber) -> tuple[str, ...]:
        """The injected services ``fiber`` still waits for (empty when it is not pending)."""
        slot = self._slots.get(fiber)
        if slot is None or fiber.state != PENDING:
            return ()
        return tuple(name for name in slot.deps if slot.ctx.realm_of(name).get(name) is None)

    def _fail(self, fiber: Fiber, exc: BaseException) -> None:
        fiber.state = FAILED
        fiber.error = exc
        if fiber not in self.failures:
            self.failures.append(fiber)
        origin = f" from {fiber.source}" if fiber.source else ""
        log.error('plugin row "%s" (%s)%s failed: %s', fiber.row_id, fiber.plugin_name, origin, _chain(exc))

    # -- reacting to services -------------------------------------------------------------

    def service_changed(self, realm: Realm, name: str) -> None:
        for slot in tuple(self._by_dep.get(name, ())):
            if slot.ctx.realm_of(name) is realm:
                self._queue.append(slot)
        self._kick()

    def _kick(self) -> None:
        if self._settling is not None or not self._queue:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._settling = loop.create_task(self._drain())

    async def settle(self) -> None:
        """Process queued activations until nothing more can change."""
        while self._queue or self._settling is not None:
            if self._settling is None:
                self._settling = asyncio.get_running_loop().create_task(self._drain())
            task = self._settling
            if task is asyncio.current_task():
                return
            await asyncio.shield(task)

    async def _drain(self) -> None:
        try:
            while self._queue:
                await self._reconcile(self._queue.popleft())
        finally:
            self._settling = None

    async def _reconcile(self, slot: Slot) -> None:
        fiber = slot.fiber
        if fiber not in self._slots or fiber.state in (DISPOSING, DISPOSED, LOADING):
            return
        current = {name: slot.ctx.realm_of(name).get(name) for name in slot.watched()}
        if fiber.state == ACTIVE:
            if all(slot.bound.get(k) is v for k, v in current.items()):
                return
            await self._unload(fiber)
            fiber.state = PENDING
        if fiber.state == FAILED and all(slot.bound.get(k) is v for k, v in current.items()):
            return
        if all(current[name] is not None for name in slot.deps):
            await self._activate(slot, current)
        elif fiber.state != FAILED:
            fiber.state = PENDING
            slot.bound = current

    async def _activate(self, slot: Slot, bound: dict[str, object]) -> None:
        fiber = slot.fiber
        fiber.state = LOADING
        fiber.error = None
        slot.bound = bound
        try:
            await slot.start(slot.ctx)
        except BaseException as exc:
            if escalates(exc):
                raise
            errors = await self._unload(fiber)
            for err in errors:
                log.warning("rollback of %s: %s", fiber.row_id, _chain(err))
            self._fail(fiber, exc if isinstance(exc, Exception) else PluginAborted(describe(exc)))
            return
        fiber.state = ACTIVE
        if fiber in self.failures:
            self.failures.remove(fiber)

    # -- unloading ------------------------------------------------------------------------

    async def _unload(self, fiber: Fiber) -> list[Exception]:
        """Unwind ``fiber``'s effects LIFO, then unload its children in reverse order."""
        fiber.state = DISPOSING
        errors = await fiber.unwind()
        for child in reversed(fiber.children):
            errors.extend(await self.dispose(child, detach=False))
        fiber.children.clear()
        return errors

    async def dispose(self, fiber: Fiber, *, detach: bool = True) -> list[Exception]:
        """Unload ``fiber`` for good and forget it; returns the teardown errors."""
        if fiber.state == DISPOSED:
            return []
        slot = self._slots.pop(fiber, None)
        if slot is not None:
            for name in slot.watched():
                self._by_dep.get(name, set()).discard(slot)
        errors = await self._unload(fiber)
        fiber.state = DISPOSED
        if detach and fiber.parent is not None and fiber in fiber.parent.children:
            fiber.parent.children.remove(fiber)
        return errors


def _chain(exc: BaseException) -> str:
    parts = [describe(exc)]
    cur = exc.__cause__
    while cur is not None and len(parts) < 8:
        parts.append(describe(cur))
        cur = cur.__cause__
    return " <- ".join(parts)
