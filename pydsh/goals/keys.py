"""The goal service's key."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.goals.service import GoalService

GOALS: ServiceKey[GoalService] = ServiceKey("goals")
