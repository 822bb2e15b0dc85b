"""The batch's one error: a task file, a task, or the batch itself cannot be run as asked."""

from __future__ import annotations

from pydsh.kernel.errors import PydshError


class BatchError(PydshError):
    """A bad task line, workspace, setup command or backend address; ``str(exc)`` is one line."""
