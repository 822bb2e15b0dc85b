"""Keys of the services the ``compaction`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.compaction.basic import BasicCompaction
    from pydsh.compaction.meter import TokenMeter
    from pydsh.compaction.pruner import ToolResultPruner

COMPACTION: ServiceKey[BasicCompaction] = ServiceKey("compaction")
TOKEN_METER: ServiceKey[TokenMeter] = ServiceKey("token_meter")
TOOL_RESULT_PRUNER: ServiceKey[ToolResultPruner] = ServiceKey("tool_result_pruner")
