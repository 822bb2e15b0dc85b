"""Scopes: identity keys with a parent chain that route events and scoped registry lookups.

A scope key is any object compared by identity (the agent loop uses the live ``Agent``).
``ScopeTree`` keeps the parent links and caches each key's ancestor set, so event admission
is one set-membership test (spec 01 §10.2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

T = TypeVar("T")

ScopeKey = object


class ScopeTree:
    """Parent links between scope keys, with cached ancestor sets."""

    def __init__(self) -> None:
        self._parent: dict[object, object] = {}
        self._ancestors: dict[object, frozenset[int]] = {}

    def parent_of(self, key: object) -> object | None:
        return self._parent.get(key)

    def chain(self, key: object | None) -> Iterator[object]:
        """Yield ``key`` and then its ancestors, nearest first."""
        cur = key
        while cur is not None:
            yield cur
            cur = self._parent.get(cur)

    def ancestors(self, key: object) -> frozenset[int]:
        """Identity set (``id()``) of ``key`` and all its ancestors. Only keys bound below a parent are
        cached: an event about a scope already forgotten (its agent's disposal, say) must not keep it."""
        found = self._ancestors.get(key)
        if found is None:
            found = frozenset(id(k) for k in self.chain(key))
            if key in self._parent:
                self._ancestors[key] = found
        return found

    def bind(self, key: object, parent: object | None) -> None:
        """Set (or change) the parent of ``key``; cycles are rejected."""
        if parent is not None and id(key) in self.ancestors(parent):
            raise ValueError("scope parent binding would create a cycle")
        if parent is None:
            self._parent.pop(key, None)
        else:
            self._parent[key] = parent
        self._ancestors.clear()

    def forget(self, key: object) -> None:
        """Drop ``key``'s own link; children keep theirs until they are forgotten too."""
        if self._parent.pop(key, None) is not None or key in self._ancestors:
            self._ancestors.clear()


class ScopeBinding:
    """Handle returned by ``bind_scope_parent``: the only way to change a key's parent."""

    def __init__(self, tree: ScopeTree, key: object) -> None:
        self._tree = tree
        self.key = key

    def rebind(self, parent: object | None) -> None:
        self._tree.bind(self.key, parent)


class ScopedLayers(Generic[T]):
    """A registry with one global layer plus per-scope layers, merged by name nearest-first.

    Duplicate names inside one layer raise ``ValueError``; every ``add`` returns a remover so
    callers can push it onto an effect stack (spec 01 §10.3).
    """

    def __init__(self, tree: ScopeTree, what: str) -> None:
        self._tree = tree
        self._what = what
        self._layers: dict[object | None, dict[str, T]] = {None: {}}
        self.version = 0

    def add(self, scope: object | None, name: str, entry: T) -> Callable[[], None]:
        layer = self._layers.setdefault(scope, {})
        if name in layer:
            raise ValueError(f'{self._what} "{name}" is already registered in this scope')
        layer[name] = entry
        self.version += 1

        def remove() -> None:
            cur = self._layers.get(scope)
            if cur is not None and cur.get(name) is entry:
                del cur[name]
                self.version += 1
                if not cur and scope is not None:
                    del self._layers[scope]

        return remove

    def merged(self, scope: object | None) -> dict[str, T]:
        """Entries visible from ``scope``: nearest layer shadows farther ones by name."""
        out: dict[str, T] = dict(self._layers[None])
        keys = list(self._tree.chain(scope))
        for key in reversed(keys):
            layer = self._layers.get(key)
            if layer:
                out.update(layer)
        return out

    def lookup(self, scope: object | None, name: str) -> T | None:
        for key in self._tree.chain(scope):
            layer = self._layers.get(key)
            if layer is not None and name in layer:
                return layer[name]
        return self._layers[None].get(name)


class Scope:
    """A tagged child context: registrations through ``ctx`` are visible to this scope only and
    are disposed with it (spec 01 §10.1)."""

    def __init__(self, ctx: Context, key: object) -> None:
        self.ctx = ctx
        self.key = key

    async def dispose(self) -> None:
        errors = await self.ctx.runtime.loader.dispose(self.ctx.fiber)
        if errors:
            raise ExceptionGroup(f"scope teardown of {self.ctx.fiber.row_id} failed", errors)


def create_scope(ctx: Context, key: object, parent: object | None = None) -> Scope:
    """Open a scope keyed by ``key`` below ``ctx``'s fiber, optionally bound to ``parent``."""
    from pydsh.kernel.fiber import ACTIVE, Fiber

    tree = ctx.runtime.scopes
    fiber = Fiber(f"{ctx.fiber.row_id}/scope", ctx.fiber.plugin_name, ctx.fiber)
    fiber.state = ACTIVE
    scoped = ctx.child(fiber, scope=key)
    tree.bind(key, parent)
    fiber.push(lambda: tree.forget(key))
    return Scope(scoped, key)


def bind_scope_parent(ctx: Context, key: object, parent: object | None) -> ScopeBinding:
    """Set ``key``'s parent once; change it later only through the returned binding."""
    tree = ctx.runtime.scopes
    tree.bind(key, parent)
    return ScopeBinding(tree, key)


def scope_of(ctx: Context) -> object | None:
    return ctx.scope
