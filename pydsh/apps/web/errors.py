"""The one error shape of the web API: ``{"error": {"code", "message"}}`` (spec 12 §4)."""

from __future__ import annotations

from typing import Any

from pydsh.kernel.errors import PydshError


class ApiError(PydshError):
    """An HTTP error with a snake_case code and a one-sentence message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        message = sentence(message)
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message)


def sentence(text: str) -> str:
    """``text`` as one line ending in a full stop (error messages are one sentence)."""
    line = " ".join(text.split())
    return line if line.endswith((".", "!", "?")) else f"{line}."


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} was not found")
