"""The persistence seam: where sessions are stored, independent of the file format (spec 02 §9.1)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydsh.session.errors import (
    SessionAlreadyExistsError,
    SessionAlreadyOwnedError,
    SessionFormatUnsupportedError,
    SessionHandleClosedError,
    SessionOwnershipLostError,
    SessionPersistenceCorruptionError,
    SessionPersistenceNotFoundError,
    SessionReadOnlyError,
)
from pydsh.session.events import Event

Access = Literal["read", "write"]

__all__ = [
    "Access",
    "SessionAlreadyExistsError",
    "SessionAlreadyOwnedError",
    "SessionFormatUnsupportedError",
    "SessionHandle",
    "SessionHandleClosedError",
    "SessionOwnershipLostError",
    "SessionPersistence",
    "SessionPersistenceCorruptionError",
    "SessionPersistenceNotFoundError",
    "SessionReadOnlyError",
]


class SessionHandle(Protocol):
    """Access to one stored session; a write handle is the session's single writer."""

    id: str
    header: dict[str, Any]
    inherited_event_count: int
    access: Access

    async def read(self, offset: int = 0, length: int | None = None) -> list[Event]: ...

    def append(self, events: list[Event]) -> None:
        """Buffer events for the next batch (best effort; ``flush`` is the barrier)."""

    async def flush(self) -> None:
        """Make everything appended so far durable."""

    async def close(self) -> None: ...


class SessionPersistence(Protocol):
    """The ``session_persistence`` service."""

    async def create(self, header: dict[str, Any], *, inherited_event_count: int = 0) -> SessionHandle: ...

    async def open(self, session_id: str, access: Access) -> SessionHandle: ...

    async def flush(self) -> None: ...

    async def stat(self, session_id: str) -> dict[str, Any]: ...

    async def list(self) -> list[dict[str, Any]]: ...

    def exists(self, session_id: str) -> bool: ...
