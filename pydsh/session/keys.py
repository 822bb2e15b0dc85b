"""Keys of the services the ``session`` package provides (cheap to import: names and types only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.session.index import SessionIndex
    from pydsh.session.log import SessionStore
    from pydsh.session.persistence.base import SessionPersistence
    from pydsh.session.projections import SessionProjections
    from pydsh.session.query import SessionQuery
    from pydsh.session.title import TitleService

SESSIONS: ServiceKey[SessionStore] = ServiceKey("sessions")
SESSION_PERSISTENCE: ServiceKey[SessionPersistence] = ServiceKey("session_persistence")
SESSION_QUERY: ServiceKey[SessionQuery] = ServiceKey("session_query")
SESSION_TITLE: ServiceKey[TitleService] = ServiceKey("session_title")
SESSION_PROJECTIONS: ServiceKey[SessionProjections] = ServiceKey("session_projections")
SESSION_INDEX: ServiceKey[SessionIndex] = ServiceKey("session_index")
