"""Keys of the ``schedules`` package: the reminder service the tools, the command and the web page use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.schedules.service import Schedules

SCHEDULES: ServiceKey[Schedules] = ServiceKey("schedule")
