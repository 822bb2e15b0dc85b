"""The bus events the ``session`` package dispatches (one declaration each; see ``kernel/events.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.events import Emit, Parallel, Serial

if TYPE_CHECKING:
    from pydsh.session.events import Event
    from pydsh.session.log import Session

SESSION_CREATED: Serial[Session, None] = Serial(
    "session/created", "a session joined the store; listeners run in order before anything is appended"
)
SESSION_DISPOSED: Emit[Session] = Emit("session/disposed", "a session left the store")
SESSION_EVENT: Emit[Session, Event] = Emit("session/event", "an event was committed to a session's log")
SESSION_FLUSH: Parallel[Session] = Parallel("session/flush", "make everything appended so far durable")
