"""The ``working_directory`` service and the ``working-directory:current`` runtime context (spec 05 §4.9).

A session's effective directory starts at its header ``cwd`` and follows its
``working-directory/change`` events. Changing it logs the event and queues a note for the
model's next step; the sandbox workspace root never moves.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pydsh.agent.keys import SYSTEM_PROMPT, WORKING_DIRECTORY
from pydsh.contract.agent import Agent, user_message
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.session.events import Event
from pydsh.session.log import Session


class CwdState:
    """Fold unit ``workingDirectory``: the latest logged directory (``None`` = header cwd)."""

    key = "workingDirectory"

    def init(self) -> str | None:
        return None

    def fold(self, state: str | None, event: Event) -> str | None:
        if event["type"] == "working-directory/change":
            return event["data"]["cwd"]  # type: ignore[no-any-return]
        return state


CWD = CwdState()


class WorkingDirectoryError(PydshError, ValueError):
    """A directory change was refused; the message is model-facing."""


def quote(path: str) -> str:
    """A path as a JSON string literal, as runtime-authored texts write it."""
    return json.dumps(path, ensure_ascii=False)


def directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be a working directory (a phrase after the quoted path), or ``None``: it must be
    an existing directory named by a usable path (no NUL, no unpaired surrogate)."""
    if not path:
        return "is empty"
    if "\0" in path:
        return "contains a NUL character"
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return "is not a valid file name (it holds an unpaired UTF-16 surrogate)"
    if not os.path.isdir(path):
        return "is not an existing directory"
    return None


def origin(session: Session) -> str:
    """The session workspace: its header ``cwd`` (the process cwd for a header without one)."""
    return str(session.header.get("cwd") or os.getcwd())


class WorkingDirectory:
    """Read and change the effective working directory of sessions."""

    def logged(self, session: Session) -> str:
        """The effective directory as logged, without checking it still exists."""
        return session.fold(CWD) or origin(session)

    def current(self, agent: Agent) -> str:
        """The effective directory; one that vanished is restored to the workspace with one note.

        When the workspace itself is gone there is nowhere to go: the session stays on it and no note is
        repeated (a note per step would make every step queue the input of the next, with no end).
        """
        session = agent.session
        cwd = self.logged(session)
        if directory_problem(cwd) is None:
            return cwd
        home = origin(session)
        if cwd == home:
            return home
        session.append("working-directory/change", {"cwd": home})
        text = f"The working directory {quote(cwd)} is unavailable. The working directory is now {quote(home)}."
        agent.inject(user_message(text, {"kind": "working-directory"}))
        return home

    def resolve(self, agent: Agent, path: str) -> str:
        """``path`` made absolute against the current directory (not checked)."""
        return os.path.normpath(os.path.join(self.current(agent), os.path.expanduser(path)))

    def change(self, agent: Agent, path: str) -> str:
        """Enter ``path``; logs ``working-directory/change`` and injects the change note."""
        if not path:
            raise WorkingDirectoryError("working-directory: cd must not be empty")
        old = self.current(agent)
        new = os.path.normpath(os.path.join(old, os.path.expanduser(path)))
        if directory_problem(new) is not None:
            raise WorkingDirectoryError(f"working-directory: directory does not exist: {quote(path)}")
        if new == old:
            return new
        agent.session.append("working-directory/change", {"cwd": new})
        text = f"The working directory changed from {quote(old)} to {quote(new)}."
        agent.inject(user_message(text, {"kind": "working-directory"}))
        return new


name = "working-directory"
inject = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: Any) -> None:
    service = WorkingDirectory()
    ctx.provide(WORKING_DIRECTORY, service)

    def context_text(agent: Agent | None) -> str | None:
        if agent is None:
            return None
        return f"Current working directory: {quote(service.logged(agent.session))}."

    ctx.require(SYSTEM_PROMPT).context(
        ctx, "working-directory:current", 100, context_text, required=True, interpolate=False
    )
