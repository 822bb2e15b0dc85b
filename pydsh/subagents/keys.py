"""Key of the service the ``subagents`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.subagents.service import SubagentService

SUBAGENTS: ServiceKey[SubagentService] = ServiceKey("subagents")
