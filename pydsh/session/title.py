"""Session titles: fallback titles from the first prompt, user renames (spec 02 §11.2).

The fallback observer cannot append re-entrantly, so it schedules its ``session/title`` with
``loop.call_soon``; the agent loop's single yield before streaming lands it right after the
step's ``request/context``, as in the golden fixture.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.session.errors import SessionTitleInvalidError
from pydsh.session.events import Event
from pydsh.session.hooks import SESSION_DISPOSED, SESSION_EVENT
from pydsh.session.keys import SESSION_TITLE, SESSIONS
from pydsh.session.log import Session

_OSC = r"(?:\x1b\]|\x9d)[^\x07\x1b]*(?:\x07|\x1b\\|$)"
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
_ESC2 = r"\x1b[@-_]"
_CONTROLS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]"
_SPACE = r"\s+"
"""Patterns of :func:`clean`; ``re`` compiles them on first use, not at import."""


def clean(text: str) -> str:
    """Strip terminal escapes and invisible controls, collapse whitespace, trim."""
    for pattern in (_OSC, _CSI, _ESC2, _CONTROLS):
        text = re.sub(pattern, "", text)
    return re.sub(_SPACE, " ", text).strip()


def cut_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes without splitting a code point."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", "ignore")


def eligible_text(event: Event) -> str | None:
    """The cleaned prompt text of a title-eligible ``user/message`` (source kind ``user``)."""
    if event["type"] != "user/message":
        return None
    data = event["data"]
    if data.get("source", {}).get("kind") != "user":
        return None
    text = clean("\n".join(b["text"] for b in data.get("content", ()) if b.get("type") == "text"))
    return text or None


def fallback_title(text: str, max_words: int, max_bytes: int) -> str:
    words = text.split(" ")[:max_words]
    return cut_bytes(" ".join(words), max_bytes).rstrip()


class TitleState:
    """Fold unit ``title``: the latest ``session/title`` (and whether a user pinned it)."""

    key = "title"

    def init(self) -> dict[str, Any] | None:
        return None

    def fold(self, state: dict[str, Any] | None, event: Event) -> dict[str, Any] | None:
        if event["type"] != "session/title":
            return state
        data = event["data"]
        pinned = state is not None and state["source"].get("kind") == "user"
        if pinned and data["source"].get("kind") != "user":
            return state
        return {
            "title": data["title"],
            "messageSeqs": list(data["messageSeqs"]),
            "source": data["source"],
            "eventSeq": event["seq"],
            "updatedAt": event["time"],
        }


TITLE = TitleState()


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    fallbackMaxWords: int = Field(default=5, ge=1)
    fallbackMaxBytes: int = Field(default=40, ge=1)
    maxTitleBytes: int = Field(default=80, ge=1)


class TitleService:
    """The ``session_title`` service."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._scheduled: set[str] = set()

    def fallback_for(self, events: list[Event]) -> tuple[str, int] | None:
        """The fallback title and the seq of the first eligible prompt, if any."""
        for event in events:
            text = eligible_text(event)
            if text:
                title = fallback_title(text, self.config.fallbackMaxWords, self.config.fallbackMaxBytes)
                return (title, event["seq"]) if title else None
        return None

    def observe(self, session: Session, event: Event) -> None:
        if session.id in self._scheduled or session.fold(TITLE) is not None:
            return
        text = eligible_text(event)
        if text is None:
            return
        self._scheduled.add(session.id)
        title = fallback_title(text, self.config.fallbackMaxWords, self.config.fallbackMaxBytes)
        if not title:
            return
        data = {"title": title, "messageSeqs": [event["seq"]], "source": {"kind": "fallback"}}

        def commit() -> None:
            if session.fold(TITLE) is None:
                session.append("session/title", data)

        asyncio.get_running_loop().call_soon(commit)

    def rename(self, session: Session, title: str) -> Event:
        """A user title: normalised, capped at ``maxTitleBytes``, pinning the title."""
        cleaned = cut_bytes(clean(title), self.config.maxTitleBytes).rstrip()
        if not cleaned:
            raise SessionTitleInvalidError("a session title must not be empty")
        return session.append("session/title", {"title": cleaned, "messageSeqs": [], "source": {"kind": "user"}})

    def forget(self, session_id: str) -> None:
        self._scheduled.discard(session_id)

    def current(self, session: Session) -> dict[str, Any] | None:
        return session.fold(TITLE)  # type: ignore[no-any-return]

    def title_of(self, session: Session) -> str | None:
        """What a frontend shows as the session's title: the logged one, else the fallback of its first
        prompt not yet committed; ``None`` before any prompt."""
        state = session.fold(TITLE)
        if state is not None:
            return str(state["title"])
        found = self.fallback_for(session.events)
        return found[0] if found is not None else None


name = "session-title"
inject = (SESSIONS,)


def apply(ctx: Context, config: Config) -> None:
    service = TitleService(config)
    ctx.provide(SESSION_TITLE, service)
    ctx.on(SESSION_EVENT, service.observe)
    ctx.on(SESSION_DISPOSED, lambda session: service.forget(session.id))
