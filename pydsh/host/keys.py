"""The ``app`` service: what an app bundle's row provides so the launcher can run it over a host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.host.host import Host


class App(Protocol):
    """A frontend over the host it runs in: ``run`` returns the process's exit status."""

    async def run(self, host: Host, args: list[str]) -> int: ...


APP: ServiceKey[App] = ServiceKey("app")
