"""The web host's state: opened sessions, summaries, live streams, pending approvals and questions.

Stdlib and pydsh only (no web framework): the starlette routes in ``api.py`` call into one
:class:`WebHub`, which listens to the kernel's events on its own loop and fans frames out to
the open streams (spec 12 §4.3). Nothing here appends to a log except through the services that
own those events (inbox, permissions, title, model selection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydsh.agent.agent import Agent, AgentOptions, user_message
from pydsh.agent.model_selection import ModelSelection
from pydsh.agent.presets import RemoteError, header_preset, preset_setup
from pydsh.agent.registry import AgentHandle, AgentRegistry, CreateAgentOptions
from pydsh.apps.web.errors import ApiError, not_found
from pydsh.apps.web.fanout import Subscriber, Topic
from pydsh.apps.web.summary import SummaryFold, fold_events, workspace_id
from pydsh.apps.web.team import lead_of, team_view
from pydsh.kernel import services
from pydsh.kernel.context import Context
from pydsh.kernel.fiber import Disposer
from pydsh.policy.questions import Answer, QuestionRequest
from pydsh.session.errors import SessionAlreadyOwnedError, SessionError, SessionPersistenceNotFoundError
from pydsh.session.events import Event
from pydsh.session.log import Session, SessionStore
from pydsh.session.title import TITLE

log = logging.getLogger("pydsh.web")

INDEX = ""
PROJECTION_INTERVAL_S = 0.1
INDEX_INTERVAL_S = 0.25
INDEX_EVENTS = frozenset({"turn/end", "turn/start", "session/title", "agent/inbox/spliced", "approval/decided"})
PENDING_EVENTS = frozenset({"agent/inbox/spliced", "approval/asked", "approval/decided"})
READ_CACHE = 2
PERMISSION_PRESETS = ("read-only", "workspace-write", "danger-full-access")
METER_KEYS = ("tokenUsage", "contextPressure", "contextBreakdown")


@dataclass
class PendingApproval:
    """An ask waiting for the browser; ``future`` resolves to the outcome."""

    approval_id: str
    session_id: str
    tool_name: str
    call_id: str | None
    reason: str | None
    arguments: Any
    asked_at: int
    future: asyncio.Future[str] = field(repr=False)

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"approvalId": self.approval_id, "sessionId": self.session_id, "toolName": self.tool_name}
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.reason is not None:
            out["reason"] = self.reason
        if self.arguments is not None:
            out["arguments"] = self.arguments
        out["askedAt"] = self.asked_at
        return out


@dataclass
class PendingQuestion:
    """A set of user questions waiting for the browser; ``future`` resolves to the answers."""

    request: QuestionRequest
    session_id: str
    asked_at: int
    future: asyncio.Future[list[Answer]] = field(repr=False)

    def view(self) -> dict[str, Any]:
        return {"requestId": self.request.request_id, "questions": self.request.questions, "askedAt": self.asked_at}


def now_ms() -> int:
    return int(time.time() * 1000)


class WebHub:
    """Everything the HTTP layer asks of the host, on the kernel's loop."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sessions_topic = Topic()
        self.index_topic = Topic()
        self.handles: dict[str, AgentHandle] = {}
        self.approvals: dict[str, PendingApproval] = {}
        self.questions: dict[str, PendingQuestion] = {}
        self.settled: set[str] = set()
        self._folds: dict[str, SummaryFold] = {}
        self._offline: dict[str, tuple[int, dict[str, Any]]] = {}
        self._reads: OrderedDict[str, tuple[int, Session]] = OrderedDict()
        self._inflight: dict[str, list[dict[str, Any]]] = {}
        self._opening: dict[str, asyncio.Task[Agent]] = {}
        self._dirty_projection: dict[str, set[str]] = {}
        self._dirty_index: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._listeners: list[Disposer] = []
        self._selections: weakref.WeakKeyDictionary[Agent, ModelSelection] = weakref.WeakKeyDictionary()
        self.stopping = False

    # -- services -------------------------------------------------------------------------------

    @property
    def agents(self) -> AgentRegistry:
        return services.agents(self.ctx)

    @property
    def store(self) -> SessionStore:
        return services.sessions(self.ctx)

    def start(self) -> None:
        """Listen to the kernel's events and answer approvals."""
        ctx = self.ctx
        self._listeners += [
            ctx.on("session/event", self._on_session_event),
            ctx.on("agent/status", self._on_status),
            ctx.on("agent/assistant-stream", self._on_stream),
            ctx.on("agent/disposed", self._on_disposed),
        ]
        if ctx.get("agent_teams") is not None:
            from pydsh.teams.service import ROUTES_CHANGED

            self._listeners.append(ctx.on(ROUTES_CHANGED, self._mark_team))
        projections = ctx.get("session_projections")
        if projections is not None:
            self._listeners.append(projections.on_changed(ctx, self._on_projection))
        approval = ctx.get("approval")
        if approval is not None:
            self._listeners.append(approval.add_answerer(ctx, self.answer_approval))
        questions = ctx.get("user_questions")
        if questions is not None:
            self._listeners.append(questions.add_answerer(ctx, self.answer_questions))

    async def stop(self) -> None:
        """Cancel running turns, resolve what waits as ``cancelled``, flush and close every stream (C5)."""
        self.stopping = True
        for pending in list(self.approvals.values()):
            if not pending.future.done():
                pending.future.set_result("cancelled")
        for question in list(self.questions.values()):
            if not question.future.done():
                question.future.cancel()
        for handle in list(self.handles.values()):
            agent = handle.agent
            if agent.status == "running":
                agent.cancel({"kind": "user"}, keep_inbox=True)
        subagents = self.ctx.get("subagents")
        if subagents is not None and self.handles:
            with contextlib.suppress(Exception):
                await subagents.drain(list(self.handles))
        for sid, handle in list(self.handles.items()):
            try:
                await handle.dispose()
            except Exception:
                log.warning("closing session %s failed", sid, exc_info=True)
        self.handles.clear()
        for remove in self._listeners:
            remove()
        self._listeners.clear()
        for timer in self._timers.values():
            timer.cancel()
        self.sessions_topic.close_all()
        self.index_topic.close_all()

    # -- opening sessions ---------------------------------------------------------------------

    def _setup(self) -> Callable[[Context, Agent], Any]:
        return preset_setup(self.ctx)

    async def create_session(
        self,
        cwd: str,
        agent_preset: str | None,
        permission_preset: str | None,
        model: dict[str, Any] | None,
    ) -> Agent:
        """A new root session in ``cwd`` with the chosen presets and route."""
        if self.stopping:
            raise ApiError(409, "shutting_down", "The server is shutting down.")
        if not os.path.isdir(cwd):
            raise ApiError(422, "not_a_directory", f"{cwd} is not an existing directory.")
        options = AgentOptions()
        if model is not None:
            await self.check_route(model)
            options = AgentOptions(
                provider=model["provider"], model=model["model"], reasoning_effort=model.get("effort")
            )
        if agent_preset is not None and agent_preset not in self._roster_ids():
            raise ApiError(422, "unknown_agent_preset", f'Unknown agent preset "{agent_preset}".')
        if permission_preset is not None and permission_preset not in PERMISSION_PRESETS:
            raise ApiError(422, "unknown_preset", f'Unknown permission preset "{permission_preset}".')
        opts = CreateAgentOptions(
            cwd=cwd, agent_options=options, agent_preset=header_preset(self.ctx, agent_preset), setup=self._setup()
        )
        try:
            handle = await self.agents.create(opts)
        except RemoteError as exc:
            raise ApiError(422, "unknown_agent_preset", str(exc)) from None
        agent = handle.agent
        self.handles[agent.id] = handle
        if permission_preset is not None:
            self.set_permission(agent, permission_preset)
        self._mark_index(agent.id)
        return agent

    def _roster_ids(self) -> set[str]:
        roster = self.ctx.get("agent_presets")
        if roster is None or not roster.configured:
            return set()
        return {str(p["id"]) for p in roster.list()}

    async def agent_for(self, session_id: str) -> Agent:
        """The session's live agent, resuming a stored root session once however many ask at once."""
        live = self.agents.get(session_id)
        if live is not None:
            return live
        if self.stopping:
            raise ApiError(409, "shutting_down", "The server is shutting down.")
        task = self._opening.get(session_id)
        if task is None:
            task = asyncio.ensure_future(self._resume(session_id))
            self._opening[session_id] = task
            task.add_done_callback(lambda done: self._opened(session_id, done))
        return await asyncio.shield(task)

    def _opened(self, session_id: str, task: asyncio.Task[Agent]) -> None:
        """Forget a finished resume; its failure was raised to whoever waited for it."""
        self._opening.pop(session_id, None)
        if not task.cancelled():
            task.exception()

    async def _resume(self, session_id: str) -> Agent:
        if (await self.read(session_id)).header.get("origin") == "subagent":
            raise ApiError(409, "member_session", "Member sessions are resumed by their agents, not from the page.")
        try:
            handle = await self.agents.resume(session_id, setup=self._setup())
        except SessionPersistenceNotFoundError:
            raise not_found(f'Session "{session_id}"') from None
        except SessionAlreadyOwnedError:
            raise ApiError(
                409, "session_owned_elsewhere", f'Session "{session_id}" is open in another pydsh process.'
            ) from None
        except (SessionError, RemoteError) as exc:
            raise ApiError(409, "session_unavailable", f"Session {session_id} cannot be opened: {exc}") from None
        self.handles[session_id] = handle
        return handle.agent

    async def read(self, session_id: str) -> Session:
        """The live session, else its stored log (read only, never made live).

        The last few stored reads are kept while their log's size is unchanged, so opening a
        session (its summary, its tail, its stream) reads a long log once.
        """
        live = self.store.get(session_id)
        if live is not None:
            return live
        persistence = self.ctx.get("session_persistence")
        revision = None
        if persistence is not None:
            try:
                revision = (await persistence.stat(session_id))["revision"]
            except SessionPersistenceNotFoundError:
                raise not_found(f'Session "{session_id}"') from None
            except SessionError as exc:
                raise ApiError(409, "session_unreadable", f"Session {session_id} cannot be read: {exc}") from None
            cached = self._reads.get(session_id)
            if cached is not None and cached[0] == revision:
                self._reads.move_to_end(session_id)
                return cached[1]
        session = await self._read_stored(session_id)
        if revision is not None:
            self._reads[session_id] = (revision, session)
            while len(self._reads) > READ_CACHE:
                self._reads.popitem(last=False)
        return session

    async def _read_stored(self, session_id: str) -> Session:
        try:
            session: Session = await self.ctx.require("session_query").read(session_id)
        except SessionPersistenceNotFoundError:
            raise not_found(f'Session "{session_id}"') from None
        except SessionError as exc:
            raise ApiError(409, "session_unreadable", f"Session {session_id} cannot be read: {exc}") from None
        return session

    # -- prompts, queue, control ----------------------------------------------------------------

    async def prompt(
        self, session_id: str, text: str, mode: str, client_message_id: str | None, zone: str | None
    ) -> dict[str, Any]:
        """Queue a prompt as the next turn or steer it into the next step (F27)."""
        session = await self.read(session_id)
        if session.header.get("origin") == "subagent":
            raise ApiError(409, "member_session", "Member sessions take input from their agents, not from the user.")
        agent = await self.agent_for(session_id)
        source: dict[str, Any] = {"kind": "user", "rpcId": client_message_id or str(uuid.uuid4())}
        if zone is not None:
            source["clientTimeZone"] = zone
        message = user_message(text, source)
        accepted = agent.session.seq
        running = agent.status == "running"
        try:
            if mode == "steer" and running:
                agent.steer(message)
            else:
                agent.followup(message)
        except ValueError as exc:
            raise ApiError(409, "not_accepted", str(exc)) from None
        return {"messageId": message["id"], "queued": running, "acceptedAtSeq": accepted}

    def unqueue(self, session_id: str, message_id: str) -> None:
        """Cancel a queued prompt in the inbox so it never runs (F27)."""
        agent = self.agents.get(session_id)
        inbox = getattr(agent, "inbox", None)
        if inbox is None:
            raise not_found(f'Queued message "{message_id}"')
        if not inbox.remove(message_id):
            raise ApiError(409, "already_claimed", "That message was already taken by the agent or removed.")

    def cancel(self, session_id: str) -> None:
        agent = self.agents.get(session_id)
        if agent is not None and agent.status == "running":
            agent.cancel({"kind": "user"}, keep_inbox=True)

    async def interrupt(self, session_id: str) -> None:
        """Abort a member session's turn with the user's authority, keeping its input (F31)."""
        session = await self.read(session_id)
        if session.header.get("origin") != "subagent":
            raise ApiError(409, "not_a_member", "Interrupt is for member sessions; use cancel for your own.")
        agent = self.agents.get(session_id)
        if agent is not None and agent.status == "running":
            agent.cancel({"kind": "user"}, keep_inbox=True)

    def set_permission(self, agent: Agent, preset: str) -> str:
        permissions = self.ctx.get("permissions")
        if permissions is None:
            raise ApiError(404, "feature_unavailable", "Permission presets are not composed.")
        try:
            permissions.set_permission_preset(agent, preset)
        except ValueError as exc:
            raise ApiError(422, "unknown_preset", str(exc)) from None
        return preset

    async def check_route(self, model: dict[str, Any]) -> None:
        """422 unless the provider has an adapter and the model (and effort) are in its catalog."""
        llm = self.ctx.require("llm")
        provider, model_id, effort = model["provider"], model["model"], model.get("effort")
        if not llm.has_adapter(provider):
            raise ApiError(422, "unknown_model", f'Unknown provider "{provider}".')
        catalog = await llm.list_models(provider)
        info = next((m for m in catalog if m["id"] == model_id), None)
        if catalog and info is None:
            raise ApiError(422, "unknown_model", f'Provider "{provider}" has no model "{model_id}".')
        efforts = [
            e["id"] if isinstance(e, dict) else e for e in (info or {}).get("reasoning", {}).get("efforts") or []
        ]
        if effort is not None and effort not in efforts:
            raise ApiError(422, "unknown_effort", f'Model "{model_id}" offers no effort "{effort}".')

    async def set_model(self, session_id: str, model: dict[str, Any]) -> dict[str, Any]:
        """Route the session's next requests to ``model`` and echo it as ``model/selection`` (F26)."""
        await self.check_route(model)
        agent = await self.agent_for(session_id)
        from pydsh.agent.model_selection import Route, install_model_selection

        selection = self._selections.get(agent)
        if selection is None:
            selection = ModelSelection()
            install_model_selection(agent.ctx, selection, owner=self.ctx)
            self._selections[agent] = selection
        selection.current = Route(model["provider"], model["model"], model.get("effort"))
        data = {"provider": model["provider"], "model": model["model"]}
        if model.get("effort"):
            data["reasoningEffort"] = model["effort"]
        agent.session.append("model/selection", data)
        return model

    async def set_title(self, session_id: str, title: str) -> str:
        """Rename: a ``session/title`` with ``source: {kind: "user"}`` (F5); empty is 422."""
        titles = self.ctx.get("session_title")
        if titles is None:
            raise ApiError(404, "feature_unavailable", "Session titles are not composed.")
        if not title.strip():
            raise ApiError(422, "empty_title", "A session title must not be empty.")
        agent = await self.agent_for(session_id)
        try:
            event = titles.rename(agent.session, title)
        except ValueError as exc:
            raise ApiError(422, "empty_title", str(exc)) from None
        return str(event["data"]["title"])

    # -- approvals and questions ----------------------------------------------------------------

    async def answer_approval(self, request: Any) -> str:
        """The approval answerer (F36): publish a pending entry and wait for the browser's decision."""
        session = request.agent.session
        ask_id = _open_ask(session.events, request.tool_name, request.call_id)
        pending = PendingApproval(
            approval_id=ask_id or str(uuid.uuid4()),
            session_id=session.id,
            tool_name=request.tool_name,
            call_id=request.call_id,
            reason=request.reason,
            arguments=_call_arguments(session.events, request.call_id),
            asked_at=now_ms(),
            future=asyncio.get_running_loop().create_future(),
        )
        if self.stopping:
            return "cancelled"
        self.approvals[pending.approval_id] = pending
        self._pending_changed(session.id)
        try:
            return await pending.future
        finally:
            self.approvals.pop(pending.approval_id, None)
            self.settled.add(pending.approval_id)
            self._pending_changed(session.id)

    def decide(self, session_id: str, approval_id: str, outcome: str) -> None:
        """First answer wins; a settled ask is 409, an unknown one 404."""
        pending = self.approvals.get(approval_id)
        if pending is None or pending.session_id != session_id:
            if approval_id in self.settled or self._asked_in_log(session_id, approval_id):
                raise ApiError(409, "already_decided", "This approval was already decided.")
            raise not_found(f'Approval "{approval_id}"')
        if pending.future.done():
            raise ApiError(409, "already_decided", "This approval was already decided.")
        pending.future.set_result(outcome)

    def _asked_in_log(self, session_id: str, approval_id: str) -> bool:
        session = self.store.get(session_id)
        return session is not None and any(
            e["type"] == "approval/asked" and e["data"].get("id") == approval_id for e in session.events
        )

    async def answer_questions(self, request: QuestionRequest) -> list[Answer] | None:
        """The user-questions answerer (F37): publish the questions and wait for the browser's answers."""
        agent = request.agent
        if agent is None or self.stopping:
            return None
        pending = PendingQuestion(
            request=request,
            session_id=agent.id,
            asked_at=now_ms(),
            future=asyncio.get_running_loop().create_future(),
        )
        self.questions[request.request_id] = pending
        self._pending_changed(agent.id)
        try:
            return await pending.future
        finally:
            self.questions.pop(request.request_id, None)
            self.settled.add(request.request_id)
            self._pending_changed(agent.id)

    def answer(self, session_id: str, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Deliver answers (or a skip) to a waiting question set: 404 unknown, 409 settled, 422 bad id/option."""
        pending = self.questions.get(request_id)
        if pending is None or pending.session_id != session_id or pending.future.done():
            if request_id in self.settled or (pending is not None and pending.future.done()):
                raise ApiError(409, "already_answered", "These questions were already answered.")
            raise not_found(f'Question "{request_id}"')
        request = pending.request
        if body.get("skip"):
            answers = request.skipped()
        else:
            try:
                answers = request.answers_from_json(body)
            except ValueError as exc:
                raise ApiError(422, "invalid_answer", f"{str(exc)[:1].upper()}{str(exc)[1:]}.") from None
        given = {a.id: a for a in answers}
        complete = [given.get(str(q["id"]), Answer(str(q["id"]))) for q in request.questions]
        pending.future.set_result(complete)
        return {"answers": [a.to_json() for a in complete]}

    def pending(self, session_id: str) -> dict[str, Any]:
        """The ``Pending`` value of a session (§4.1)."""
        agent = self.agents.get(session_id)
        queued = []
        inbox = getattr(agent, "inbox", None)
        if inbox is not None and agent is not None:
            waiting = [
                (mode, m)
                for mode, messages in (("queue", inbox.next_turn), ("steer", inbox.next_step))
                for m in messages
                if m.get("source", {}).get("kind") == "user"
            ]
            times = _insert_times(agent.session.events, {m["id"] for _mode, m in waiting})
            for mode, message in waiting:
                queued.append(
                    {
                        "messageId": message["id"],
                        "text": "".join(b.get("text", "") for b in message["content"]),
                        "mode": mode,
                        "createdAt": times.get(message["id"], 0),
                    }
                )
        return {
            "approvals": [p.view() for p in self.approvals.values() if p.session_id == session_id],
            "questions": [q.view() for q in self.questions.values() if q.session_id == session_id],
            "queued": queued,
        }

    # -- summaries --------------------------------------------------------------------------------

    def _fold(self, session: Session) -> SummaryFold:
        fold = self._folds.get(session.id)
        if fold is None or fold.last_seq != session.seq:
            fold = fold_events(session.events)
            self._folds[session.id] = fold
        return fold

    def title_of(self, session: Session) -> str:
        state = session.fold(TITLE)
        if state is not None:
            return str(state["title"])
        titles = self.ctx.get("session_title")
        found = titles.fallback_for(session.events) if titles is not None else None
        return str(found[0]) if found is not None else "New session"

    def summary(self, session: Session, fold: SummaryFold | None = None) -> dict[str, Any]:
        """``SessionSummary`` of a live or stored session."""
        header = session.header
        fold = fold or self._fold(session)
        agent = self.agents.get(session.id)
        status = "offline" if agent is None else ("running" if agent.status == "running" else "idle")
        pending = self.pending(session.id)
        cwd = str(header.get("cwd") or "")
        out: dict[str, Any] = {
            "sessionId": session.id,
            "cwd": cwd,
            "workspaceId": workspace_id(cwd),
            "title": self.title_of(session),
            "createdAt": header.get("createdAt"),
            "updatedAt": fold.updated_at or header.get("createdAt"),
            "status": status,
            "waiting": {"approvals": len(pending["approvals"]), "questions": len(pending["questions"])},
            "queued": len(pending["queued"]),
        }
        if header.get("agentPreset"):
            out["agentPreset"] = header["agentPreset"]
        out["permissionPreset"] = self.permission_of(session, fold)
        out["model"] = fold.model or self.default_route()
        out["stats"] = fold.stats()
        if header.get("parentSession"):
            out["parentSessionId"] = header["parentSession"]
        return out

    def permission_of(self, session: Session, fold: SummaryFold) -> str:
        permissions = self.ctx.get("permissions")
        agent = self.agents.get(session.id)
        if permissions is not None and agent is not None:
            return str(permissions.preset(agent))
        if fold.permission_preset:
            return fold.permission_preset
        return str(permissions.default_preset) if permissions is not None else "workspace-write"

    def default_route(self) -> dict[str, Any]:
        default = self.ctx.get("agent_default_model")
        route = dict(default.current_selection()) if default is not None else {"provider": "", "model": ""}
        return route

    async def list_summaries(self) -> list[dict[str, Any]]:
        """Root sessions, newest first by last event; stored logs are folded once per revision."""
        rows: dict[str, dict[str, Any]] = {}
        persistence = self.ctx.get("session_persistence")
        if persistence is not None:
            for item in await persistence.list():
                header = item["header"]
                if header.get("origin") == "subagent" or self.store.get(header["id"]) is not None:
                    continue
                cached = self._offline.get(header["id"])
                if cached is None or cached[0] != item["revision"]:
                    try:
                        session = await self.read(header["id"])
                    except ApiError:
                        continue
                    cached = (item["revision"], self.summary(session, fold_events(session.events)))
                    self._offline[header["id"]] = cached
                rows[header["id"]] = dict(cached[1], status="offline")
        for session in self.store.live():
            if session.header.get("origin") != "subagent":
                rows[session.id] = self.summary(session)
        return sorted(rows.values(), key=lambda r: (-int(r["updatedAt"] or 0), r["sessionId"]))

    def projections(self, session: Session) -> dict[str, Any]:
        """The projection values of ``GET /api/sessions/{id}``."""
        fold = self._fold(session)
        registry = self.ctx.get("session_projections")
        meter = registry.snapshot(session, METER_KEYS)["values"] if registry is not None else {}
        source = (session.fold(TITLE) or {}).get("source", {"kind": "fallback"})
        return {
            "title": {"title": self.title_of(session), "source": source},
            "todos": fold.todos,
            "tokenUsage": meter.get("tokenUsage"),
            "contextPressure": meter.get("contextPressure"),
            "contextBreakdown": meter.get("contextBreakdown"),
            "sessionStats": fold.stats(),
            "modelSelection": fold.model or self.default_route(),
            "permissionPreset": self.permission_of(session, fold),
        }

    async def compaction_budget(self, session: Session) -> dict[str, int] | None:
        """``{thresholdTokens, contextWindow}`` of the session's compaction trigger (F39's warning), if any."""
        agent = self.agents.get(session.id)
        roster = self.ctx.get("agent_presets")
        engine = roster.service_for(agent, "compaction") if roster is not None and agent is not None else None
        engine = engine or self.ctx.get("compaction")
        budgets = getattr(engine, "budgets", None)
        target = session.request_header()
        if budgets is None or target is None:
            return None
        config = target["config"]
        try:
            found = await budgets(session, config["provider"], config["model"])
        except Exception:
            log.debug("no compaction budget for %s", session.id, exc_info=True)
            return None
        return {"thresholdTokens": int(found.threshold), "contextWindow": int(found.context_window)}

    # -- streams --------------------------------------------------------------------------------

    def subscribe(self, session_id: str) -> tuple[Subscriber, list[Event] | None, list[dict[str, Any]]]:
        """Register a stream before reading the tail (rule 1): the live events and in-flight frames now,
        or ``None`` events for a stored session (the caller reads them, deduplicating by seq)."""
        sub = Subscriber()
        self.sessions_topic.add(session_id, sub)
        live = self.store.get(session_id)
        events = list(live.events) if live is not None else None
        return sub, events, list(self._inflight.get(session_id, ()))

    def unsubscribe(self, session_id: str, sub: Subscriber) -> None:
        self.sessions_topic.remove(session_id, sub)

    def subscribe_index(self) -> Subscriber:
        sub = Subscriber()
        self.index_topic.add(INDEX, sub)
        return sub

    def unsubscribe_index(self, sub: Subscriber) -> None:
        self.index_topic.remove(INDEX, sub)

    def status_of(self, session_id: str) -> str:
        agent = self.agents.get(session_id)
        return "offline" if agent is None else ("running" if agent.status == "running" else "idle")

    # -- kernel listeners -------------------------------------------------------------------------

    def _on_session_event(self, session: Session, event: Event) -> None:
        try:
            fold = self._folds.get(session.id)
            if fold is None:
                self._fold(session)
            elif event["seq"] == fold.last_seq + 1:
                fold.apply(event)
            else:
                self._folds[session.id] = fold_events(session.events)
            self.sessions_topic.publish(session.id, ("session-event", event, event["seq"]))
            etype = event["type"]
            if etype in PENDING_EVENTS:
                self._pending_changed(session.id)
            if etype in INDEX_EVENTS:
                self._mark_index(session.id)
            self._mark_projection(session.id, {"title", "todos", "sessionStats", "modelSelection", "permissionPreset"})
            if session.header.get("origin") == "subagent" or etype == "subagent/catalog":
                self._mark_agents(session)
            if etype.startswith("team/"):
                self._mark_team(session.id)
        except Exception:
            log.warning("web fan-out of a session event failed", exc_info=True)

    def _on_status(self, payload: dict[str, Any]) -> None:
        agent: Agent = payload["agent"]
        status = "running" if payload["status"] == "running" else "idle"
        self.sessions_topic.publish(agent.id, ("status", {"status": status}, None))
        self._mark_index(agent.id)
        if agent.session.header.get("origin") == "subagent":
            self._mark_agents(agent.session)
            lead = lead_of(self, agent.id)
            if lead is not None:
                self._mark_team(lead)

    def _on_stream(self, payload: dict[str, Any]) -> None:
        frame = payload["frame"]
        sid = payload["agent"].id
        if frame["type"] == "start":
            self._inflight[sid] = [frame]
        elif frame["type"] == "end":
            self._inflight.pop(sid, None)
        else:
            self._inflight.setdefault(sid, []).append(frame)
        self.sessions_topic.publish(sid, ("assistant-stream", frame, None))

    def _on_disposed(self, payload: dict[str, Any]) -> None:
        """Forget what was kept for a session that left memory (its log is read again if asked)."""
        agent: Agent = payload["agent"]
        if self.index_topic.has(INDEX) and agent.session.header.get("origin") != "subagent" and not self.stopping:
            self.index_topic.publish(INDEX, ("session", self.summary(agent.session), None))
        self._folds.pop(agent.id, None)
        self._inflight.pop(agent.id, None)
        handle = self.handles.get(agent.id)
        if handle is not None and handle.agent is agent:
            del self.handles[agent.id]

    def _on_projection(self, session: Session, key: str, view: Any) -> None:
        if key in METER_KEYS:
            self._mark_projection(session.id, {key})

    def _pending_changed(self, session_id: str) -> None:
        self.sessions_topic.publish(session_id, ("pending", self.pending(session_id), None))
        self._mark_index(session_id)

    def lineage(self, session_id: str) -> list[str]:
        """``session_id`` and its live ancestors, nearest first."""
        out = [session_id]
        session = self.store.get(session_id)
        while session is not None and session.header.get("origin") == "subagent" and len(out) < 100:
            parent = str(session.header.get("parentSession"))
            out.append(parent)
            session = self.store.get(parent)
        return out

    # -- coalescing -------------------------------------------------------------------------------

    def _later(self, key: str, delay: float, callback: Callable[[], None]) -> None:
        if key in self._timers or self.stopping:
            return

        def run() -> None:
            self._timers.pop(key, None)
            try:
                callback()
            except Exception:
                log.warning("web stream update %s failed", key, exc_info=True)

        self._timers[key] = asyncio.get_running_loop().call_later(delay, run)

    def _mark_projection(self, session_id: str, keys: set[str]) -> None:
        if not self.sessions_topic.has(session_id):
            return
        self._dirty_projection.setdefault(session_id, set()).update(keys)
        self._later(f"projection:{session_id}", PROJECTION_INTERVAL_S, lambda: self._flush_projection(session_id))

    def _flush_projection(self, session_id: str) -> None:
        keys = self._dirty_projection.pop(session_id, set())
        session = self.store.get(session_id)
        if session is None or not keys:
            return
        values = self.projections(session)
        for key in sorted(keys):
            frame = {"key": key, "value": values[key], "asOfSeq": session.seq}
            self.sessions_topic.publish(session_id, ("projection", frame, None))

    def _mark_index(self, session_id: str) -> None:
        if not self.index_topic.has(INDEX):
            return
        self._dirty_index.add(session_id)
        self._later("index", INDEX_INTERVAL_S, self._flush_index)

    def _flush_index(self) -> None:
        dirty, self._dirty_index = self._dirty_index, set()
        for sid in sorted(dirty):
            session = self.store.get(sid)
            if session is None or session.header.get("origin") == "subagent":
                continue
            self.index_topic.publish(INDEX, ("session", self.summary(session), None))

    def _mark_agents(self, session: Session) -> None:
        root = self.lineage(session.id)[-1]
        if not self.sessions_topic.has(root):
            return
        self._later(f"agents:{root}", PROJECTION_INTERVAL_S, lambda: self._spawn_agents(root))

    def _mark_team(self, lead_id: str) -> None:
        if self.sessions_topic.has(lead_id):
            self._later(f"team:{lead_id}", PROJECTION_INTERVAL_S, lambda: self._send_team(lead_id))

    def _send_team(self, lead_id: str) -> None:
        team = team_view(self, lead_id)
        if team is not None:
            self.sessions_topic.publish(lead_id, ("team", team, None))

    def _spawn_agents(self, root: str) -> None:
        async def send() -> None:
            from pydsh.apps.web.agents import agent_tree

            tree = await agent_tree(self, root)
            self.sessions_topic.publish(root, ("agents", {"root": tree}, None))

        task = asyncio.ensure_future(send())
        task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("web agents update failed", exc_info=task.exception())


def _insert_times(events: list[Event], ids: set[str]) -> dict[str, int]:
    """When each of ``ids`` entered the inbox (the time of its splice), newest splices first."""
    found: dict[str, int] = {}
    for event in reversed(events):
        if len(found) == len(ids):
            break
        if event["type"] == "agent/inbox/spliced":
            for message in event["data"]["inserted"]:
                if message["id"] in ids:
                    found.setdefault(message["id"], int(event["time"]))
    return found


def _open_ask(events: list[Event], tool_name: str, call_id: str | None) -> str | None:
    """The id of the newest ``approval/asked`` of this call not yet decided."""
    decided: set[str] = set()
    for event in reversed(events):
        if event["type"] == "approval/decided":
            decided.add(event["data"]["id"])
        elif event["type"] == "approval/asked":
            data = event["data"]
            if data["id"] not in decided and data["toolName"] == tool_name and data.get("callId") == call_id:
                return str(data["id"])
    return None


def _call_arguments(events: list[Event], call_id: str | None) -> Any:
    """The parsed arguments of the ``tool/call`` with ``call_id`` (its raw text if not JSON)."""
    import json

    if call_id is None:
        return None
    for event in reversed(events):
        if event["type"] == "tool/call" and event["data"].get("callId") == call_id:
            raw = event["data"].get("arguments")
            try:
                return json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                return raw
    return None
