"""Errors of the session log and its persistence (spec 02 §2, §9.1)."""

from __future__ import annotations

from pydsh.kernel.errors import PydshError


class SessionError(PydshError):
    """Base class of every session-log error."""


class SessionLogError(SessionError, ValueError):
    """An event (appended or read) breaks a log rule; the message names its seq."""

    def __init__(self, seq: int | None, message: str) -> None:
        self.seq = seq
        super().__init__(f"seq {seq}: {message}" if seq is not None else message)


class SessionFormatUnsupportedError(SessionError):
    """The log uses a format version or event vocabulary this harness cannot read."""


class SessionAlreadyExistsError(SessionError):
    pass


class SessionAlreadyOwnedError(SessionError):
    """Another process (or handle) holds the session's write lock."""


class SessionHandleClosedError(SessionError):
    pass


class SessionOwnershipLostError(SessionError):
    """The log or lock a writer holds was removed or replaced behind it; it writes no more."""


class SessionPersistenceCorruptionError(SessionError):
    """A committed record of the stored log is unreadable or inconsistent."""


class SessionPersistenceNotFoundError(SessionError):
    pass


class SessionPersistenceIOError(SessionError):
    """The stored log cannot be read or written; the message names the file and the OS error."""


class SessionReadOnlyError(SessionError):
    """A write on a handle opened read-only, or on a log (or session directory) that is not writable."""


class SessionForkError(SessionError):
    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


class SessionTitleInvalidError(SessionError, ValueError):
    pass
