"""``TeamError``: a refused Team operation, rendered ``Error: <message>`` with its code (spec 08 §A.10)."""

from __future__ import annotations

from pydsh.contract.tools import ToolError


class TeamError(ToolError):
    """A Team failure; ``code`` is one of spec 08 §A.10 (``None`` for the plain listing errors)."""

    error_name = "TeamError"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message, code)
