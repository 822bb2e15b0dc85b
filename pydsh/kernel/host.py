"""The root of one composition: runtime, root fiber and root context."""

from __future__ import annotations

from pydsh.kernel.compose import Row
from pydsh.kernel.context import Context, Runtime
from pydsh.kernel.fiber import ACTIVE, Fiber
from pydsh.kernel.plugin import Loader


class Kernel:
    """Loads a row tree into a fresh root context and tears it down again."""

    def __init__(self) -> None:
        self.runtime = Runtime()
        self.fiber = Fiber("root", "pydsh", None)
        self.fiber.state = ACTIVE
        self.ctx = Context(self.runtime, self.fiber)
        self.fiber.ctx = self.ctx

    @property
    def loader(self) -> Loader:
        return self.runtime.loader

    async def load(self, rows: list[Row]) -> None:
        """Add ``rows`` (already resolved) below the root and settle activation."""
        self.runtime.loader.add_rows(self.ctx, rows)
        await self.runtime.loader.settle()

    async def dispose(self) -> None:
        """Unload everything (the shutdown path of every app); errors are raised together."""
        errors = await self.runtime.loader.dispose(self.fiber)
        if errors:
            raise ExceptionGroup("shutdown failed", errors)
