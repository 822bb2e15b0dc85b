"""The ``agent_teams`` service: membership, roster, spawn, mailbox, task board, waiting (spec 08 Part A).

Every ordinary root agent is the Lead of its own Team (``TeamId`` = the Lead's Session id);
teammates are named continuable children of the Lead, created through the ``subagents`` service,
so they share its names, activations, settlement notices and cold resume. The Team lives only in
the Lead's log as ``team/*`` records, appended and flushed before a tool returns, and is rebuilt
by :class:`~pydsh.teams.fold.TeamFold` on resume.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pydsh.agent.hooks import AGENT_CREATED, AGENT_STATUS, AgentCreated, AgentStatus
from pydsh.agent.keys import AGENTS
from pydsh.agent.registry import AgentRegistry
from pydsh.contract.agent import user_message
from pydsh.kernel.cancel import AbortSignal
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context
from pydsh.session.errors import SessionError
from pydsh.session.events import Event
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_PROJECTIONS, SESSIONS
from pydsh.session.log import Session, new_session_id
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import ROOT
from pydsh.subagents.service import StartRequest, SubagentService
from pydsh.teams import board
from pydsh.teams.errors import TeamError
from pydsh.teams.fold import VERSION, Member, TeamState
from pydsh.teams.keys import AGENT_TEAMS, TEAM_ROUTES
from pydsh.teams.projection import TeamUnit

MEMBER_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
NAME_LIMIT = 32
DESCRIPTION_LIMIT = 200
MIN_WAIT_MS, MAX_WAIT_MS, DEFAULT_WAIT_MS = 10_000, 3_600_000, 30_000
SAFE_INTEGER = 2**53 - 1
NO_PROGRESS = (
    "No other Team member is running or provisioning. wait_agent cannot make progress or wake inactive teammates. "
    "Re-list with list_agents and team_task_list, then use send_message to wake each required inactive teammate "
    "before waiting again."
)


class Config(BaseModel):
    """The ``agent-teams`` row; limits are checked by :func:`limits` (``TEAM_INVALID_CONFIG``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    maxMembers: Any = 16
    maxTasks: Any = 256
    maxMessageBytes: Any = 65536
    disposalTimeoutMs: Any = 5000


def limits(config: Config) -> Config:
    """``config`` after checking that every limit is a positive safe integer."""
    for field in ("maxMembers", "maxTasks", "maxMessageBytes", "disposalTimeoutMs"):
        value = getattr(config, field)
        if type(value) is not int or not 0 < value <= SAFE_INTEGER:
            raise TeamError(f"{field} must be a positive safe integer", "TEAM_INVALID_CONFIG")
    return config


class TeamRoutes(Protocol):
    """The optional ``team_routes`` service: a teammate's selected route and its source.

    A plugin that selects teammate routes provides it; ``list_agents`` then adds ``route`` and
    ``routeSource`` to each teammate row, and the provider emits ``team/routes-changed`` (Team id).
    """

    def route(self, team_id: str, name: str) -> tuple[dict[str, str] | None, str]:
        """``(route, source)``; ``route`` is ``None`` when the teammate runs on its base route."""
        ...


@dataclass(frozen=True)
class Membership:
    """An agent's place in a Team: the live Lead, the Team id, its role and its member name."""

    lead: Any
    team_id: str
    role: str
    name: str


def check_member_name(name: object) -> str:
    text = name.strip() if isinstance(name, str) else ""
    if not MEMBER_NAME.match(text) or len(text) > NAME_LIMIT or text == ROOT:
        raise TeamError(
            "teammate name must be lower-kebab-case, start with a letter, have at most 32 characters, "
            'and not be "lead"',
            "TEAM_INVALID_MEMBER_NAME",
        )
    return text


def prompt_accepted(events: Iterable[Event]) -> bool:
    """Whether a log holds an accepted user-source prompt (queued in the inbox or already a message)."""
    for event in events:
        etype = event["type"]
        if etype == "agent/inbox/spliced":
            inserted = event["data"].get("inserted") or []
            if any((m.get("source") or {}).get("kind") == "user" for m in inserted):
                return True
        elif etype == "user/message" and (event["data"].get("source") or {}).get("kind") == "user":
            return True
    return False


class AgentTeams:
    """One Team per live Lead, folded from the Lead's log; operations take the calling agent."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = limits(config)
        self.disposing = False
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    @property
    def agents(self) -> AgentRegistry:
        return self.ctx.require(AGENTS)

    @property
    def subagents(self) -> SubagentService:
        return self.ctx.require(SUBAGENTS)

    # -- state ----------------------------------------------------------------------------------

    def state(self, lead: Any) -> TeamState:
        """The Team of ``lead`` folded up to its latest record (may carry a ``failure``)."""
        folded: TeamState = self.ctx.require(SESSION_PROJECTIONS).state_of(lead.session, TeamUnit.key)
        return folded

    def sound_state(self, lead: Any) -> TeamState:
        """The Team state, or ``TEAM_STATE_CORRUPT`` once its fold failed."""
        state = self.state(lead)
        if state.failure is not None:
            raise TeamError(f"Agent Teams state is corrupt: {state.failure}", "TEAM_STATE_CORRUPT")
        return state

    def roster_names(self, parent: Any) -> set[str]:
        """Every name of ``parent``'s roster when it is a Team Lead (failed members included)."""
        membership = self.try_membership(parent)
        if membership is None or membership.role != "lead":
            return set()
        return set(self.state(parent).names)

    # -- membership -----------------------------------------------------------------------------

    def try_membership(self, agent: Any) -> Membership | None:
        """The membership of the exact live ``agent`` (spec 08 §A.2), ``None`` for a non-member."""
        if agent is None or not self._live(agent):
            return None
        header = agent.session.header
        parent_id = header.get("parentSession")
        root: Any = self.agents.get(parent_id) if parent_id else None
        if root is not None:
            member = self.state(root).members.get(agent.id)
            if member is not None and member.phase in ("active", "provisioning"):
                return Membership(root, root.id, "teammate", member.name)
        own = agent.session.events[agent.session.inherited_event_count :]
        if any(e["type"] == "subagent/descriptor" for e in own):
            return None
        return Membership(agent, agent.id, "lead", ROOT)

    def _live(self, agent: Any) -> bool:
        return self.agents.get(agent.id) is agent

    def membership(self, agent: Any) -> Membership:
        found = self.try_membership(agent)
        if found is None:
            raise TeamError(f'agent "{agent.id}" is not a member of an active Agent Team', "TEAM_NOT_MEMBER")
        return found

    def name_of(self, lead: Any, state: TeamState, session_id: str) -> str:
        """A member's name for model-facing text (``lead`` for the Team id); never a Session id if known."""
        if session_id == lead.id:
            return ROOT
        member = state.members.get(session_id)
        return member.name if member is not None else session_id

    # -- records --------------------------------------------------------------------------------

    async def _record(self, lead: Any, event_type: str, body: dict[str, Any]) -> None:
        """Append one ``team/*`` record to the Lead's log and flush it before returning."""
        lead.session.append(event_type, {"version": VERSION, "teamId": lead.id, **body})
        self.changed(lead.id)
        await self.ctx.require(SESSIONS).flush(lead.session)

    async def _member_record(self, lead: Any, member: Member) -> None:
        await self._record(lead, "team/member", {"member": member.record()})

    # -- spawn ----------------------------------------------------------------------------------

    async def spawn(self, caller: Any, args: dict[str, Any], providers: dict[str, str]) -> dict[str, Any]:
        """``spawn_teammate``: the spawn flow of spec 08 §A.4, steps 1–7 (``providers``: context → provider)."""
        membership = self.membership(caller)
        if membership.role != "lead":
            raise TeamError("only the Team Lead can create teammates", "TEAM_LEAD_REQUIRED")
        if self.disposing:
            raise TeamError("Agent Teams service is disposing", "TEAM_DISPOSED")
        lead = membership.lead
        state = self.sound_state(lead)
        name = check_member_name(args.get("name"))
        description = board.text_field(args.get("description"), "description", DESCRIPTION_LIMIT)
        context = args.get("context") or "fresh"
        if context not in ("fresh", "fork"):
            raise TeamError('context must be "fresh" or "fork"', "TEAM_INVALID_ARGUMENT")
        provider = providers[context]
        if name in state.names:
            raise TeamError(f'teammate name "{name}" was already used in this Team', "TEAM_MEMBER_NAME_TAKEN")
        subagents = self.subagents
        taken = subagents.taken_names(lead) | subagents.names.held.get(lead.id, set())
        if name in taken:
            raise TeamError(f'name "{name}" is already used by a subagent of the Team Lead', "TEAM_MEMBER_NAME_TAKEN")
        if len(state.members) >= self.config.maxMembers:
            raise TeamError(f"Team member limit {self.config.maxMembers} reached", "TEAM_MEMBER_LIMIT")
        reservation = subagents.names.reserve(lead.id, taken, name)
        member = Member(new_session_id(), name, description, provider, context, "provisioning")
        try:
            await self._member_record(lead, member)
            request = StartRequest(
                parent=lead,
                prompt=str(args.get("prompt", "")),
                label=description,
                child_id=member.id,
                return_guidance=False,
            )
            try:
                await subagents.start_activation(provider, request, reservation)
                await self._check_accepted(member)
            except BaseException as exc:
                await self._fail(lead, member, str(exc) or type(exc).__name__)
                raise
        finally:
            reservation.release()
        member.phase = "active"
        await self._member_record(lead, member)
        return {"member": self.member_view(lead, self.state(lead), member)}

    async def _check_accepted(self, member: Member) -> None:
        child = self.agents.get(member.id)
        session: Session | None = child.session if child is not None else await self.subagents._session(member.id)
        events = session.events[session.inherited_event_count :] if session is not None else []
        if not prompt_accepted(events):
            raise TeamError(
                f'teammate "{member.name}" initial prompt was not durably accepted', "TEAM_PROVISIONING_CONFLICT"
            )
        if child is not None:
            await self.ctx.require(SESSIONS).flush(child.session)

    async def _fail(self, lead: Any, member: Member, error: str) -> None:
        """Step 7: record the failure (the name and slot stay consumed) and drain the child."""
        member.phase, member.error = "failed", error
        await self._member_record(lead, member)
        await self.subagents.drain_child(member.id)

    # -- recovery -------------------------------------------------------------------------------

    async def reconcile(self, lead: Any) -> None:
        """Settle every ``provisioning`` member of a starting Lead from its child's log (spec 08 §A.4)."""
        state = self.state(lead)
        if state.failure is not None:
            return
        for member in [m for m in state.members.values() if m.phase == "provisioning"]:
            problem = await self._provisioning_problem(lead, member)
            current = self.state(lead).members.get(member.id)
            if current is None or current.phase != "provisioning":
                raise TeamError(
                    f'teammate "{member.name}" was settled concurrently during recovery', "TEAM_PROVISIONING_CONFLICT"
                )
            settled = Member(member.id, member.name, member.description, member.provider, member.context, "active")
            if problem is not None:
                settled.phase, settled.error = "failed", problem
            await self._member_record(lead, settled)

    async def _provisioning_problem(self, lead: Any, member: Member) -> str | None:
        """Why a provisioning member cannot become active, or ``None`` when its log proves it."""
        try:
            session = await self.subagents._session(member.id)
        except (OSError, SessionError) as exc:
            return f'teammate "{member.name}" session cannot be read: {exc}'
        if session is None:
            return f'teammate "{member.name}" was never created'
        if session.header.get("parentSession") != lead.id:
            return f'teammate "{member.name}" belongs to another parent session'
        own = session.events[session.inherited_event_count :]
        descriptor = next((e["data"] for e in own if e["type"] == "subagent/descriptor"), None)
        if (
            descriptor is None
            or descriptor.get("mode") != "continuable"
            or descriptor.get("provider") != member.provider
        ):
            return f'teammate "{member.name}" has no continuable descriptor for provider "{member.provider}"'
        if not prompt_accepted(own):
            return f'teammate "{member.name}" initial prompt was not durably accepted'
        return None

    # -- views ----------------------------------------------------------------------------------

    def member_view(self, lead: Any, state: TeamState, member: Member) -> dict[str, Any]:
        """A teammate's ``MemberView`` (no Session id)."""
        live = self.agents.get(member.id)
        if member.phase in ("failed", "provisioning"):
            status = member.phase
        else:
            status = "running" if live is not None and live.status == "running" else "inactive"
        view: dict[str, Any] = {
            "target": member.name,
            "role": "teammate",
            "status": status,
            "description": member.description,
            "provider": member.provider,
            "context": member.context,
        }
        model = self._model(live if live is not None else lead)
        if model:
            view["model"] = model
        routes: TeamRoutes | None = self.ctx.get(TEAM_ROUTES)
        if routes is not None:
            route, source = routes.route(lead.id, member.name)
            view["route"] = route if route is not None else self._route(live if live is not None else lead)
            view["routeSource"] = source
        view["diagnostics"] = [member.error] if member.error else []
        return view

    def lead_view(self, lead: Any) -> dict[str, Any]:
        view: dict[str, Any] = {
            "target": ROOT,
            "role": "lead",
            "status": "running" if lead.status == "running" else "inactive",
        }
        model = self._model(lead)
        if model:
            view["model"] = model
        view["diagnostics"] = []
        return view

    def _model(self, agent: Any) -> str | None:
        from pydsh.agent.loop import route_of

        return route_of(self.ctx, agent).get("model") or None

    def _route(self, agent: Any) -> dict[str, str]:
        from pydsh.agent.loop import route_of

        return route_of(self.ctx, agent)

    def roster(self, caller: Any) -> list[dict[str, Any]]:
        """``list_agents``: the Lead row, then teammates in creation order."""
        lead = self.membership(caller).lead
        state = self.sound_state(lead)
        return [self.lead_view(lead)] + [self.member_view(lead, state, m) for m in state.members.values()]

    # -- mailbox --------------------------------------------------------------------------------

    async def send_message(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        """``send_message``: relay to the Lead or an active teammate (spec 08 §A.5)."""
        membership = self.membership(caller)
        lead = membership.lead
        state = self.sound_state(lead)
        target = str(args.get("target", "")).strip()
        if target == ROOT:
            target_id = lead.id
        else:
            member = state.member_named(target)
            if member is None or member.phase != "active":
                raise TeamError(f'active teammate "{target}" not found', "TEAM_MEMBER_NOT_FOUND")
            target_id = member.id
        if target_id == caller.id:
            raise TeamError("a Team member cannot message itself", "TEAM_SELF_MESSAGE")
        content = [
            {"type": "text", "text": f"Team message from {membership.name}:"},
            {"type": "text", "text": str(args.get("message", ""))},
        ]
        size = len(json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if size > self.config.maxMessageBytes:
            raise TeamError(f"team message exceeds {self.config.maxMessageBytes} bytes", "TEAM_MESSAGE_TOO_LARGE")
        source = {"kind": "agent-message", "form": "relay", "senderSessionId": caller.id}
        message = user_message(content, source)
        if target_id == lead.id:
            lead.steer(message)
        else:
            await self.subagents.deliver(lead, target_id, message)
        self.changed(lead.id)
        return {"sent": True}

    # -- interrupt ------------------------------------------------------------------------------

    async def interrupt(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        """``interrupt_agent``: abort a teammate's turn with the Lead's authority, keeping its inbox."""
        membership = self.membership(caller)
        if membership.role != "lead":
            raise TeamError("only the Team Lead can interrupt teammates", "TEAM_LEAD_REQUIRED")
        lead = membership.lead
        state = self.sound_state(lead)
        target = str(args.get("target", "")).strip()
        if target == ROOT:
            raise TeamError("the Team Lead cannot interrupt itself", "TEAM_INVALID_TARGET")
        member = state.member_named(target)
        if member is None or member.phase != "active":
            raise TeamError(f'active teammate "{target}" not found', "TEAM_MEMBER_NOT_FOUND")
        live = self.agents.get(member.id)
        if live is None:
            return {"previousStatus": "inactive"}
        previous = "running" if live.status == "running" else "inactive"
        await self.subagents.interrupt(lead, member.id)
        return {"previousStatus": previous}

    # -- waiting --------------------------------------------------------------------------------

    def changed(self, team_id: str) -> None:
        """Wake every ``wait_agent`` of ``team_id`` (a roster, task, status or message change)."""
        for waiter in self._waiters.pop(team_id, []):
            if not waiter.done():
                waiter.set_result(None)

    def on_status(self, payload: AgentStatus) -> None:
        if not self._waiters:
            return
        membership = self.try_membership(payload["agent"])
        if membership is not None:
            self.changed(membership.team_id)

    def _peer_active(self, caller: Any, membership: Membership, state: TeamState) -> bool:
        lead = membership.lead
        if lead is not caller and lead.status == "running":
            return True
        for member in state.members.values():
            if member.id == caller.id:
                continue
            if member.phase == "provisioning":
                return True
            live = self.agents.get(member.id)
            if member.phase == "active" and live is not None and live.status == "running":
                return True
        return False

    async def wait(self, caller: Any, args: dict[str, Any], signal: AbortSignal | None) -> dict[str, Any]:
        """``wait_agent``: the next change of this Team after the call starts, or the timeout."""
        membership = self.membership(caller)
        state = self.sound_state(membership.lead)
        timeout = args.get("timeout_ms", DEFAULT_WAIT_MS)
        if type(timeout) is not int or not MIN_WAIT_MS <= timeout <= MAX_WAIT_MS:
            raise TeamError("timeoutMs must be an integer from 10000 through 3600000", "TEAM_INVALID_TIMEOUT")
        if not self._peer_active(caller, membership, state):
            return {"timedOut": False, "noProgress": {"reason": "no-active-peer", "message": NO_PROGRESS}}
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(membership.team_id, []).append(waiter)

        def abort(_reason: object) -> None:
            if not waiter.done():
                waiter.cancel()

        remove = signal.add_callback(abort) if signal is not None else None
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout / 1000)
        except TimeoutError:
            return {"timedOut": True}
        except asyncio.CancelledError:
            if signal is not None and signal.aborted:
                raise TeamError(f"wait_agent aborted: {_reason_text(signal.reason)}", "TEAM_WAIT_ABORTED") from None
            raise
        finally:
            if remove is not None:
                remove()
            waiters = self._waiters.get(membership.team_id)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
        return {"timedOut": False}

    # -- task board -----------------------------------------------------------------------------

    def _task_view(self, lead: Any, state: TeamState, task: dict[str, Any]) -> dict[str, Any]:
        return board.view(state, task, lambda sid: self.name_of(lead, state, sid))

    async def create_task(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        lead = self.membership(caller).lead
        task = board.new_task(self.sound_state(lead), args, self.config.maxTasks)
        await self._record(lead, "team/task", {"task": task})
        state = self.state(lead)
        return self._task_view(lead, state, state.tasks[task["id"]])

    async def update_task(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        membership = self.membership(caller)
        lead = membership.lead
        state = self.sound_state(lead)

        def owner_of(target: str) -> str:
            if target == ROOT:
                return str(lead.id)
            member = state.member_named(target)
            if member is None or member.phase != "active":
                raise TeamError(f'active teammate "{target}" not found', "TEAM_MEMBER_NOT_FOUND")
            return member.id

        task = board.transition(state, args, caller.id, membership.role == "lead", owner_of)
        await self._record(lead, "team/task", {"task": task})
        state = self.state(lead)
        return self._task_view(lead, state, state.tasks[task["id"]])

    def get_task(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        lead = self.membership(caller).lead
        state = self.sound_state(lead)
        return self._task_view(lead, state, board.find(state, args.get("task_id")))

    def list_tasks(self, caller: Any, args: dict[str, Any]) -> dict[str, Any]:
        lead = self.membership(caller).lead
        state = self.sound_state(lead)
        return board.listing(state, args, lambda sid: self.name_of(lead, state, sid))

    # -- teardown -------------------------------------------------------------------------------

    async def dispose(self) -> None:
        """Refuse new teammates, then drain resident teammates within ``disposalTimeoutMs``."""
        self.disposing = True
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.cancel()
        self._waiters.clear()
        teammates = [a for a in self.agents.all() if (m := self.try_membership(a)) is not None and m.role == "teammate"]
        if not teammates:
            return
        try:
            await asyncio.wait_for(
                asyncio.gather(*(self.subagents.drain_child(a.id) for a in teammates)),
                self.config.disposalTimeoutMs / 1000,
            )
        except TimeoutError:
            raise TeamError(
                f"Agent Teams teardown exceeded {self.config.disposalTimeoutMs} ms", "TEAM_DISPOSAL_TIMEOUT"
            ) from None


def _reason_text(reason: object) -> str:
    if isinstance(reason, dict):
        return str(reason.get("kind") or reason)
    return str(reason)


name = "agent-teams"
inject = (AGENTS, SESSIONS, SESSION_PERSISTENCE, SESSION_PROJECTIONS, SUBAGENTS)


def apply(ctx: Context, config: Config) -> None:
    """Provide ``agent_teams``, share the roster names with plain delegations, reconcile Leads at start."""
    teams = AgentTeams(ctx, config)
    ctx.require(SESSION_PROJECTIONS).register(ctx, TeamUnit())
    ctx.provide(AGENT_TEAMS, teams)
    subagents = ctx.require(SUBAGENTS)
    subagents.sibling_names.append(teams.roster_names)
    ctx.register(lambda: subagents.sibling_names.remove(teams.roster_names))
    ctx.on(AGENT_STATUS, teams.on_status)

    async def on_created(payload: AgentCreated) -> None:
        agent = payload["agent"]
        membership = teams.try_membership(agent)
        if membership is not None and membership.role == "lead":
            await teams.reconcile(agent)

    ctx.on(AGENT_CREATED, on_created)
    ctx.effect(lambda: teams.dispose)
