"""The persistence seam: where sessions are stored, independent of the file format (spec 02 §9.1)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydsh.session.errors import (
    SessionAlreadyExistsError,
    SessionAlreadyOwnedError,
    SessionFormatUnsupportedError,
    SessionHandleClosedError,
    SessionOwnershipLostError,
    SessionPersistenceCorruptionError,
    SessionPersistenceIOError,
    SessionPersistenceNotFoundError,
    SessionReadOnlyError,
)
from pydsh.session.events import Event

if TYPE_CHECKING:
    from pydsh.session.log import Session

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
    "SessionPersistenceIOError",
    "SessionPersistenceNotFoundError",
    "SessionReadOnlyError",
]


class SessionHandle(Protocol):
    """Access to one stored session; a write handle is the session's single writer."""

    id: str
    header: dict[str, Any]
    inherited_event_count: int
    access: Access

    @property
    def path(self) -> Path | None:
        """The log file, for a backend that stores one (``DSH_SESSION_JSONL`` of bash)."""

    async def read(self, offset: int = 0, length: int | None = None) -> list[Event]:
        """Stored events with checked envelopes (``check_envelope``) and frozen ``data``."""

    def append(self, events: list[Event]) -> None:
        """Buffer events for the next batch (best effort; ``flush`` is the barrier)."""

    async def flush(self) -> None:
        """Make everything appended so far durable."""

    async def close(self) -> None: ...

    async def discard(self) -> None:
        """Close without writing what is buffered; a log this handle created is removed (rollback)."""


class SessionPersistence(Protocol):
    """The ``session_persistence`` service: the seam of spec 02 §9.1 plus what the loop and bash use."""

    async def create(self, header: dict[str, Any], *, inherited_event_count: int = 0) -> SessionHandle: ...

    async def open(self, session_id: str, access: Access) -> SessionHandle: ...

    async def flush(self) -> None: ...

    async def stat(self, session_id: str) -> dict[str, Any]: ...

    async def list(self) -> list[dict[str, Any]]: ...

    async def exists(self, session_id: str) -> bool: ...

    def bind(self, session: Session, handle: SessionHandle) -> None:
        """Copy ``session``'s not-yet-stored events into ``handle`` and follow its appends."""

    def handle_of(self, session_id: str) -> SessionHandle | None:
        """The write handle following ``session_id``, if any."""
