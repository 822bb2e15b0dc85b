"""The one error the application layer raises: a refused host or session request, with a code frontends map."""

from __future__ import annotations

from typing import Literal

from pydsh.kernel.errors import PydshError

Code = Literal[
    "composition",
    "not_open",
    "closed",
    "shutting_down",
    "not_found",
    "exists",
    "already_open",
    "member_session",
    "owned_elsewhere",
    "unavailable",
    "bad_workspace",
    "bad_session_id",
    "unknown_preset",
    "unknown_model",
    "unknown_effort",
]
"""Why a request was refused; each frontend words it for its own wire (an HTTP status, a JSON-RPC error, an
exit code)."""


class HostError(PydshError):
    """A host cannot be opened or asked: bad profile, patch or composition, unknown session, bad input.

    ``str(exc)`` is the one-line message; ``code`` says which rule refused the request.
    """

    def __init__(self, message: str, code: Code = "composition") -> None:
        super().__init__(message)
        self.code: Code = code
