"""Keys of the services the ``tools`` package provides besides the registry (whose key is in the tool contract)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.tools.jobs import JobRegistry
    from pydsh.tools.policies import Observations

JOBS: ServiceKey[JobRegistry] = ServiceKey("jobs")
FS_OBSERVATIONS: ServiceKey[Observations] = ServiceKey("fs_observations")
