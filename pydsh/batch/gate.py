"""Plugin ``batch-route-gate``: a 429 seen by one task pauses every task of the batch on that route.

Each model call passes through the ``llm/stream`` waterfall. Before it goes on, the listener waits
until the route's shared pause is over; when the call ends in ``RATE_LIMIT`` it extends the pause by
the provider's Retry-After (one second without one). The pause lives in a store every worker of the
batch reaches: small files under the batch's output on one machine, a Ray actor across a cluster.
The task that got the 429 still retries by its own route's policy (``llm-retry``); the others wait
instead of spending requests the provider would refuse.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydsh.kernel.cancel import NEVER, AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.types import LlmError, StreamChunk

DEFAULT_PAUSE_S = 1.0
"""How long a 429 without Retry-After pauses its route."""
log = logging.getLogger("pydsh.batch")


class GateStore(Protocol):
    """Where the routes' pauses are kept: the wall-clock time (epoch seconds) each route opens again."""

    async def opens_at(self, route: str) -> float: ...

    async def pause_until(self, route: str, until: float) -> None:
        """Keep ``route`` closed until ``until`` at least (an earlier time never shortens a pause)."""


class FileGate:
    """Pauses in one file per route under a directory every worker on the machine shares."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _file(self, route: str) -> Path:
        return self.directory / (re.sub(r"[^A-Za-z0-9._-]", "_", route) or "_")

    async def opens_at(self, route: str) -> float:
        try:
            return float(self._file(route).read_text() or 0)
        except (FileNotFoundError, ValueError):
            return 0.0

    async def pause_until(self, route: str, until: float) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if until > await self.opens_at(route):
                path = self._file(route)
                spare = path.with_name(path.name + ".new")
                spare.write_text(repr(until))
                spare.replace(path)


class RouteGate:
    """The ``llm/stream`` listener: wait for the route to open, and close it after a 429."""

    def __init__(self, store: GateStore, clock: Any = time.time) -> None:
        self.store = store
        self.clock = clock

    async def __call__(
        self, options: dict[str, Any], nxt: Next[AsyncIterator[StreamChunk] | None]
    ) -> AsyncIterator[StreamChunk] | None:
        route = str(options.get("provider"))
        await self.wait(route, options.get("signal") or NEVER)
        source = await nxt()
        return None if source is None else self._watch(route, source)

    async def wait(self, route: str, signal: AbortSignal) -> None:
        """Sleep until ``route`` opens (an abort ends the wait with ``AbortError``)."""
        delay = await self.store.opens_at(route) - self.clock()
        if delay > 0:
            log.info("route %s paused by a rate limit: waiting %.1f s", route, delay)
            async with signal.scope():
                await asyncio.sleep(delay)

    async def _watch(self, route: str, source: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
        """Pass the stream on; a rate-limit failure, raised or in the finish chunk, closes the route."""
        try:
            async for chunk in source:
                reason: Any = chunk.get("reason") if chunk.get("type") == "finish" else None
                if reason and reason.get("kind") == "error":
                    await self._note(route, reason.get("failure") or {})
                yield chunk
        except LlmError as exc:
            await self._note(route, exc.failure())
            raise
        finally:
            closer = getattr(source, "aclose", None)
            if closer is not None:
                await closer()

    async def _note(self, route: str, failure: Mapping[str, Any]) -> None:
        if failure.get("code") != "RATE_LIMIT":
            return
        after = failure.get("providerRetryAfterMs")
        pause = after / 1000 if isinstance(after, (int, float)) and after > 0 else DEFAULT_PAUSE_S
        await self.store.pause_until(route, self.clock() + pause)


class Config(BaseModel):
    """Where the pauses are kept: ``file`` (a directory) or ``ray`` (a named actor)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    store: Literal["file", "ray"] = "file"
    path: str | None = None
    """The directory of the ``file`` store."""
    actor: str | None = None
    """The name of the ``ray`` store's actor (in the ``pydsh-batch`` namespace)."""


def store_of(config: Config) -> GateStore:
    """The store ``config`` names; the Ray one is imported only when asked for."""
    if config.store == "ray":
        from pydsh.batch.ray_backend import RayGate

        return RayGate(config.actor or "")
    if not config.path:
        raise ValueError("batch-route-gate: the file store needs a path")
    return FileGate(config.path)


name = "batch-route-gate"


def apply(ctx: Context, config: Config) -> None:
    """Hold every model call of the composition to its route's shared pause."""
    ctx.on(LLM_STREAM, RouteGate(store_of(config)), name=name, before=("session-checkpoint-policy",))
