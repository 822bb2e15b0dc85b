"""The terminal's session control over the application layer: open, prompt, stop, answer, switch, quit.

No Textual here: the controller turns the kernel's events into a list of updates the screen drains on its
own timer (so a turn of thousands of tool calls costs the screen one batch per tick, not one redraw per
event), and it answers approvals and questions by handing the screen a future to resolve.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_STATUS, ASSISTANT_STREAM, AgentStatus, AssistantStream
from pydsh.agent.keys import AGENT_DEFAULT_MODEL, AGENTS
from pydsh.host import AgentSpec, HostError
from pydsh.host.asks import call_arguments
from pydsh.host.commands import goal_command, plan_command
from pydsh.host.host import resume_refusal
from pydsh.host.routes import RouteChoice, RouteSelections
from pydsh.llm.keys import LLM
from pydsh.policy.keys import APPROVAL, PERMISSIONS, USER_QUESTIONS
from pydsh.policy.state import PRESETS
from pydsh.session.errors import SessionError
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.keys import SESSION_INDEX, SESSION_PERSISTENCE, SESSION_PROJECTIONS, SESSION_QUERY, SESSION_TITLE
from pydsh.session.persistence.jsonl import read_header
from pydsh.session.tail import tail
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import CATALOG

if TYPE_CHECKING:
    from pydsh.host import Agent, Host, Receipt
    from pydsh.kernel.fiber import Disposer
    from pydsh.policy.approval import ApprovalRequest
    from pydsh.policy.questions import Answer, QuestionRequest
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.tui")

METER_KEYS = ("tokenUsage", "contextPressure")
MODES = tuple(PRESETS)
"""Permission presets in the order Shift+Tab cycles them."""
MAX_TREE = 200
PREVIEW_EVENTS = 200
"""Events a resumed session's first frame reads at least (its last turn, or more when that turn is short)."""


@dataclass
class Ask:
    """A tool approval waiting for the user: ``future`` takes ``allowed-once``, ``rejected`` or ``cancelled``."""

    session_id: str
    tool_name: str
    reason: str | None
    arguments: Any
    future: asyncio.Future[str] = field(repr=False)


@dataclass
class Questions:
    """``ask_user_question`` waiting for the user: ``future`` takes the answers (or ``None`` to skip)."""

    request: QuestionRequest
    future: asyncio.Future[list[Answer] | None] = field(repr=False)


@dataclass(frozen=True)
class Preview:
    """The last events of a stored session, read from its log's last lines: drawn while the full open runs."""

    session_id: str
    events: list[Event]


@dataclass(frozen=True)
class SessionRow:
    """One stored root session for the resume picker."""

    session_id: str
    title: str
    cwd: str
    updated_at: int


@dataclass
class AgentNode:
    """A member of the open session's tree of agents: its full name, status and children."""

    session_id: str
    name: str
    status: str
    children: list[AgentNode] = field(default_factory=list)


Update = tuple[str, Any]
"""``("event", (session_id, event))``, ``("delta", (session_id, kind, text))``, ``("status", (session_id, status))``,
``("ask", Ask)``, ``("questions", Questions)``."""


def _delta_key(update: Update) -> tuple[str, str] | None:
    """A delta's session and kind (what a run of deltas shares); ``None`` for any other update."""
    return update[1][:2] if update[0] == "delta" else None


class Controller:
    """One terminal's view of a host: the root session it drives and what waits for the user."""

    def __init__(self, host: Host, cwd: str | None = None) -> None:
        self.host = host
        self.ctx = host.ctx
        self.cwd = cwd or host.cwd
        self.agent: Agent | None = None
        self.updates: list[Update] = []
        self.wake: Callable[[], None] = lambda: None
        self.selections = RouteSelections(self.ctx)
        self.names: dict[str, str] = {}
        self._listeners: list[Disposer] = []
        self._waiting: dict[asyncio.Future[Any], Any] = {}
        """What waits for the user, with the answer it gets when the session closes first."""
        self.stopping = False

    # -- listening ------------------------------------------------------------------------------

    def start(self) -> None:
        """Follow the kernel's events and answer approvals and questions from this terminal."""
        ctx = self.ctx
        self._listeners += [
            ctx.on(SESSION_EVENT, self._on_event),
            ctx.on(ASSISTANT_STREAM, self._on_stream),
            ctx.on(AGENT_STATUS, self._on_status),
        ]
        approval = ctx.get(APPROVAL)
        if approval is not None:
            self._listeners.append(approval.add_answerer(ctx, self.answer_approval))
        questions = ctx.get(USER_QUESTIONS)
        if questions is not None:
            self._listeners.append(questions.add_answerer(ctx, self.answer_questions))

    def _push(self, update: Update) -> None:
        self.updates.append(update)
        self.wake()

    def drain(self) -> list[Update]:
        """Everything that happened since the last drain, in order; a run of deltas of one session and kind as
        one (the feed adds a delta to the whole answer so far: a 5 MB answer in 1 KB deltas took 7 s of copying)."""
        updates, self.updates = self.updates, []
        drained: list[Update] = []
        for key, run in itertools.groupby(updates, key=_delta_key):
            if key is None:
                drained.extend(run)
            else:
                drained.append(("delta", (*key, "".join(update[1][2] for update in run))))
        return drained

    def _on_event(self, session: Session, event: Event) -> None:
        self._push(("event", (session.id, event)))

    def _on_stream(self, payload: AssistantStream) -> None:
        frame = payload["frame"]
        if frame["type"] != "chunk":
            return
        chunk = frame["chunk"]
        if chunk["type"] in ("text-delta", "reasoning-delta"):
            self._push(("delta", (payload["agent"].id, chunk["type"], chunk["text"])))

    def _on_status(self, payload: AgentStatus) -> None:
        self._push(("status", (payload["agent"].id, payload["status"])))

    # -- approvals and questions ----------------------------------------------------------------

    async def answer_approval(self, request: ApprovalRequest) -> str:
        """Hand the ask to the screen and wait for the user's key (``cancelled`` while quitting)."""
        if self.stopping:
            return "cancelled"
        session = request.agent.session
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        ask = Ask(
            session.id, request.tool_name, request.reason, call_arguments(session.events, request.call_id), future
        )
        self._waiting[future] = "cancelled"
        self._push(("ask", ask))
        try:
            return await future
        finally:
            self._waiting.pop(future, None)

    async def answer_questions(self, request: QuestionRequest) -> list[Answer] | None:
        """Hand the questions to the screen; the user's answers, or every question skipped."""
        if self.stopping or request.agent is None:
            return None
        future: asyncio.Future[list[Answer] | None] = asyncio.get_running_loop().create_future()
        self._waiting[future] = None
        self._push(("questions", Questions(request, future)))
        try:
            answers = await future
        finally:
            self._waiting.pop(future, None)
        return answers if answers is not None else request.skipped()

    # -- the root session -----------------------------------------------------------------------

    @property
    def live(self) -> Agent:
        if self.agent is None:
            raise HostError("no session is open", "not_open")
        return self.agent

    def goal(self, raw: str) -> dict[str, str]:
        """``/goal``: the goal command's answer on the open session."""
        return goal_command(self.live, raw)

    def plan(self, raw: str) -> dict[str, str]:
        """``/plan``: switch plan mode on the open session."""
        return plan_command(self.live, raw)

    async def open(self, resume: str | None, provider: str | None = None, model: str | None = None) -> Agent:
        """Resume ``resume``, else create a new session in the workspace on the given route."""
        if resume is not None:
            agent = await self.host.resume(resume, AgentSpec(provider=provider, model=model))
        else:
            agent = await self.host.create(AgentSpec(self.cwd, provider, model))
        self.agent = agent
        return agent

    def preview(self, session_id: str) -> Preview | None:
        """The last turn of a stored root session from the end of its log (blocking, tens of milliseconds where the
        full open takes about a second for 10,000 events); ``None`` when it cannot be read so, or when the open
        would be refused (a member, a workspace gone), which the open then says before any screen."""
        log_file = getattr(self.ctx.get(SESSION_PERSISTENCE), "log_file", None)
        try:
            path = log_file(session_id) if log_file is not None else None
            if path is None or resume_refusal(read_header(path)) is not None:
                return None
        except SessionError:
            return None
        found = tail(path, 1, PREVIEW_EVENTS)
        return Preview(session_id, found[0]) if found is not None else None

    async def switch(self, session_id: str | None) -> Agent:
        """Leave the open session (its running turn stopped, logged as aborted) and open another or a new one."""
        previous = self.agent
        if previous is not None:
            await self._close(previous)
        agent = await self.open(session_id)
        self.updates = [u for u in self.updates if u[0] not in ("event", "delta", "status")]
        return agent

    async def send(self, text: str, *, steer: bool = False) -> Receipt:
        """Queue ``text`` as the next turn (``steer``: into the running turn's next step), durably."""
        return await self.live.submit(text, mode="steer" if steer else "queue", source={"kind": "user"})

    def stop_turn(self) -> bool:
        """Stop the running turn (queued prompts kept); whether one was running."""
        agent = self.agent
        if agent is None or agent.status != "running":
            return False
        agent.cancel(keep_queue=True)
        return True

    def queued(self) -> list[tuple[str, str]]:
        """The user's prompts still waiting in the inbox: ``(mode, text)``."""
        inbox = getattr(self.agent.live, "inbox", None) if self.agent is not None else None
        if inbox is None:
            return []
        waiting = [("queue", m) for m in inbox.next_turn] + [("steer", m) for m in inbox.next_step]
        return [
            (mode, "".join(b.get("text", "") for b in m["content"]))
            for mode, m in waiting
            if m.get("source", {}).get("kind") == "user"
        ]

    async def shutdown(self) -> None:
        """Quit: what waits for the user is cancelled, a running turn stopped and logged as aborted."""
        self.stopping = True
        if self.agent is not None:
            await self._close(self.agent)
        for remove in self._listeners:
            remove()
        self._listeners.clear()

    async def _close(self, agent: Agent) -> None:
        for future, answer in list(self._waiting.items()):
            if not future.done():
                future.set_result(answer)
        if agent.status == "running":
            agent.cancel(keep_queue=True)
            await agent.live.when_idle()
        await agent.close()
        self.agent = None if self.agent is agent else self.agent

    # -- settings of the session ----------------------------------------------------------------

    def mode(self) -> str:
        """The session's permission preset (``custom`` when its knobs match none)."""
        permissions = self.ctx.get(PERMISSIONS)
        if permissions is None or self.agent is None:
            return "workspace-write"
        return str(permissions.preset(self.agent.live))

    def set_mode(self, preset: str) -> str:
        """Switch the permission preset (logged; the model is told when the approval policy changes)."""
        permissions = self.ctx.get(PERMISSIONS)
        if permissions is None:
            raise HostError("permission presets are not composed", "unavailable")
        permissions.set_permission_preset(self.live.live, preset)
        return preset

    def next_mode(self) -> str:
        """Switch to the preset after the current one, in :data:`MODES` order."""
        current = self.mode()
        following = MODES[(MODES.index(current) + 1) % len(MODES)] if current in MODES else MODES[0]
        return self.set_mode(following)

    def route(self) -> dict[str, Any]:
        """The provider, model and effort of the session's next request."""
        session = self.live.session
        selected = self.selections.current(self.live.live)
        if selected is not None:
            return selected
        header = session.request_header()
        if header is not None:
            config = header["config"]
            out = {"provider": config["provider"], "model": config["model"]}
            if config.get("reasoningEffort"):
                out["reasoningEffort"] = config["reasoningEffort"]
            return out
        default = self.ctx.get(AGENT_DEFAULT_MODEL)
        return dict(default.current_selection()) if default is not None else {"provider": "", "model": ""}

    async def set_route(self, provider: str, model: str, effort: str | None = None) -> dict[str, Any]:
        """Route the next steps to ``provider``/``model`` (checked against its catalog)."""
        return await self.selections.select(self.live.live, RouteChoice(provider, model, effort))

    async def models(self) -> list[tuple[str, str, list[str]]]:
        """Every ``(provider, model, efforts)`` the composed providers list."""
        llm = self.ctx.require(LLM)
        out = []
        for provider in llm.list_providers():
            for info in await llm.list_models(provider["id"]):
                reasoning = info.get("reasoning")
                efforts = [e["id"] for e in reasoning["efforts"]] if reasoning else []
                out.append((provider["id"], info["id"], efforts))
        return out

    # -- what the screen reads ------------------------------------------------------------------

    def last_answer(self) -> str:
        """The open session's final text as every frontend reads it (``pydsh.session.outcome``)."""
        return self.live.result().final_response

    def title(self, session: Session) -> str:
        titles = self.ctx.get(SESSION_TITLE)
        return (titles.title_of(session) if titles is not None else None) or "New session"

    def meter(self, session: Session) -> dict[str, Any]:
        """``tokenUsage`` and ``contextPressure`` of the token meter (empty values without one)."""
        registry = self.ctx.get(SESSION_PROJECTIONS)
        if registry is None:
            return {}
        values: dict[str, Any] = registry.snapshot(session, METER_KEYS)["values"]
        return values

    def session(self, session_id: str) -> Session | None:
        """The live log of ``session_id`` (the root or a member in memory)."""
        return self.host.sessions.get(session_id)

    async def read(self, session_id: str) -> Session:
        """A live log, else the stored one (read only)."""
        live = self.session(session_id)
        if live is not None:
            return live
        session: Session = await self.ctx.require(SESSION_QUERY).read(session_id)
        return session

    async def recent(self, limit: int = 50, query: str = "") -> list[SessionRow]:
        """Stored root sessions, newest first, whose title contains ``query``."""
        index = self.ctx.get(SESSION_INDEX)
        if index is None:
            return []
        current = frozenset({self.agent.session_id}) if self.agent is not None else frozenset()
        entries, _more = await index.page(limit, title=query.lower(), untitled="New session", exclude=current)
        rows = []
        for entry in entries:
            title = entry.fold.title_text() if entry.fold is not None else None
            rows.append(
                SessionRow(entry.id, title or "New session", str(entry.header.get("cwd") or ""), entry.updated_at)
            )
        return rows

    async def name(self, session_id: str) -> str:
        """A member's full name in its tree (``lead`` for the root), cached."""
        cached = self.names.get(session_id)
        if cached is not None:
            return cached
        subagents = self.ctx.get(SUBAGENTS)
        found = await subagents.full_name(session_id) if subagents is not None else session_id[:8]
        self.names[session_id] = found
        return found

    def status(self, session_id: str) -> str:
        agent = self.ctx.require(AGENTS).get(session_id)
        return "inactive" if agent is None else str(agent.status)

    async def tree(self) -> AgentNode:
        """The open session's tree of agents, read from each member's catalog (at most 200 nodes)."""
        budget = [MAX_TREE]
        return await self._node(self.live.session_id, budget)

    async def _node(self, session_id: str, budget: list[int]) -> AgentNode:
        budget[0] -= 1
        node = AgentNode(session_id, await self.name(session_id), self.status(session_id))
        try:
            session = await self.read(session_id)
        except Exception:
            log.debug("agent tree: %s cannot be read", session_id, exc_info=True)
            return node
        for entry in session.fold(CATALOG):
            if budget[0] <= 0:
                break
            node.children.append(await self._node(entry.child_id, budget))
        return node

    def workspace(self) -> str:
        """The open session's working directory."""
        if self.agent is None:
            return self.cwd
        return str(self.agent.session.header.get("cwd") or self.cwd)
