"""The ``subagents`` service: delegation, continuable activations, settlement, cold resume (spec 07 §2–§5).

A child is an ordinary agent whose session header names its parent (``origin: "subagent"``).
An *activation* is one residency epoch of a child: it starts at creation or cold resume, and
settles when the child is quiet and owns no activations — then the parent receives one
settlement notice, ``subagent/end`` fires, and the child leaves memory (its log stays, so the
next message cold-resumes it under the same name).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydsh.agent.hooks import AGENT_STATUS, AgentStatus
from pydsh.agent.keys import AGENT_PRESETS, AGENTS, SYSTEM_PROMPT, WORKING_DIRECTORY
from pydsh.agent.registry import AgentRegistry, CreateAgentOptions, Setup
from pydsh.contract.agent import Agent, AgentOptions, user_message
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.policy.keys import APPROVAL, USER_QUESTIONS
from pydsh.session.errors import SessionError, SessionPersistenceNotFoundError
from pydsh.session.events import Event, build_event
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_QUERY, SESSIONS
from pydsh.session.log import Session, SessionStore, new_session_id, now_ms
from pydsh.session.outcome import closing_content
from pydsh.subagents.hooks import SUBAGENT_END, SUBAGENT_START, SubagentEnd, SubagentStart
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.names import (
    CATALOG,
    ROOT,
    CatalogEntry,
    Reservation,
    Reservations,
    SubagentError,
    catalog_event,
    is_segment,
    unknown_name,
)

log = logging.getLogger("pydsh.subagents")


RETURN_GUIDANCE = (
    'Your parent agent is "{parent}". Before you finish, send your result to that agent with '
    'send_message({{ agent: "{parent}", message: "<self-contained result>" }}). The parent shares your '
    "workspace but does not automatically receive your transcript, tool output, or reasoning. Send earlier "
    "messages as well when a finding changes what the parent should do next; sending a message does not end "
    "your turn."
)
SUMMARIES = {
    "completed": "Background subagent {name} finished and will do no further work unless you send it more.",
    "aborted": "Background subagent {name} was stopped before it finished.",
    "max-tokens": "Background subagent {name} ran out of room before it finished.",
    "refusal": "Background subagent {name} declined the task.",
    "error": "Background subagent {name} failed before it finished.",
}
DELEGATION_CONTEXT = (
    "You are a delegated subagent: your permission scope was fixed when you were started and cannot be widened "
    "from inside this session — operations that require approval are rejected automatically. When the task needs "
    "access beyond that scope, do not retry the denied operation; state the limitation in your reply so the "
    "delegating agent can handle it."
)
SUMMARY_LIMIT = 160


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    maxDepth: int = Field(default=1, ge=0)
    maxActiveSubagents: int = Field(default=8, ge=1)


@dataclass(frozen=True)
class Provider:
    """A delegation provider: ``spawn`` starts fresh, ``fork`` inherits the parent's completed turns."""

    name: str
    inherits_parent_context: bool
    depth_limit: bool = True
    agent_options: bool = True


PROVIDERS = (Provider("spawn", False), Provider("fork", True))


@dataclass
class StartRequest:
    """What a delegation asks for."""

    parent: Any
    prompt: str
    label: str
    cwd: str | None = None
    max_depth: int | None = None
    agent_options: dict[str, Any] | None = None
    continuable: bool = True
    child_id: str | None = None
    """A child id the caller minted (and recorded) beforehand; ``None`` mints one here."""
    return_guidance: bool = True
    """Whether the initial prompt carries the 07 §4.4 return guidance (Team members do not)."""


@dataclass
class Activation:
    """One residency epoch of a child."""

    child_id: str
    parent_id: str
    root_id: str
    provider: str
    handle: Any
    continuable: bool
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch_start: int = 0
    settling: asyncio.Task[None] | None = None
    settled: asyncio.Future[dict[str, Any]] | None = None

    @property
    def agent(self) -> Any:
        return self.handle.agent


def agent_depth(agent: Any) -> int:
    """``max(header.delegationDepth, options.subagent_depth)``: the header is a floor resume cannot lower."""
    header_depth = int(agent.session.header.get("delegationDepth") or 0)
    return max(header_depth, agent.options.subagent_depth or 0)


def stop_reason(events: list[Event]) -> str:
    """The epoch's stop reason from its events (spec 07 §5.4)."""
    claimed = False
    for event in reversed(events):
        if event["type"] == "turn/end":
            kind = str(event["data"]["reason"]["kind"])
            return "refusal" if kind == "blocked" and claimed else kind
        if (
            event["type"] == "agent/inbox/spliced"
            and "outcome" not in event["data"]
            and event["data"].get("removedCount")
        ):
            claimed = True
    return "aborted"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SubagentService:
    """Delegation registry, activations, names and delivery."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.providers = {p.name: p for p in PROVIDERS}
        self.activations: dict[str, Activation] = {}
        self.names = Reservations()
        self.full_names: dict[str, str] = {}
        self._slots: dict[str, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self.draining = False
        self.sibling_names: list[Callable[[Any], Iterable[str]]] = []
        """Extra names a creator's children may not take (a Team Lead's roster, spec 07 §7.2)."""

    @property
    def agents(self) -> AgentRegistry:
        return self.ctx.require(AGENTS)

    @property
    def sessions(self) -> SessionStore:
        return self.ctx.require(SESSIONS)

    # -- reading sessions (live first, persisted through session_query) -------------------------

    async def _session(self, session_id: str) -> Session | None:
        """The live session, else the stored one; ``None`` only when it does not exist (read errors raise)."""
        live = self.sessions.get(session_id)
        if live is not None:
            return live
        query = self.ctx.get(SESSION_QUERY)
        if query is None:
            return None
        try:
            read = await query.read_session(session_id)
        except SessionPersistenceNotFoundError:
            return None
        from pydsh.session.events import inherited_event_count

        events = read["events"]
        return Session(read["session"], events, inherited_event_count=inherited_event_count(events))

    async def header_of(self, session_id: str) -> dict[str, Any] | None:
        """A session's header: live, else the first line of its stored log (no full read).

        ``None`` only when the session does not exist; a log that cannot be read raises.
        """
        live = self.sessions.get(session_id)
        if live is not None:
            return live.header
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        if persistence is None:
            return None
        try:
            return (await persistence.stat(session_id))["header"]  # type: ignore[no-any-return]
        except SessionPersistenceNotFoundError:
            return None

    async def catalog_of(self, session_id: str) -> list[CatalogEntry]:
        session = await self._session(session_id)
        return list(session.fold(CATALOG)) if session is not None else []

    # -- names ----------------------------------------------------------------------------------

    async def full_name(self, session_id: str) -> str:
        """The path of segments from the tree root (``lead`` for a root; the id below an unnamed link)."""
        cached = self.full_names.get(session_id)
        if cached is not None:
            return cached
        segments: list[str] = []
        current = session_id
        while True:
            header = await self.header_of(current)
            if header is None:
                return session_id
            if header.get("origin") != "subagent":
                break
            parent = str(header.get("parentSession"))
            entry = next((e for e in await self.catalog_of(parent) if e.child_id == current), None)
            if entry is None or entry.version != 3 or entry.name is None:
                segments = [session_id]
                break
            segments.append(entry.name)
            current = parent
        name = "/".join(reversed(segments)) or ROOT
        self.full_names[session_id] = name
        return name

    async def tree_root(self, session_id: str) -> str:
        current = session_id
        for _ in range(1000):
            header = await self.header_of(current)
            if header is None or header.get("origin") != "subagent":
                return current
            current = str(header.get("parentSession"))
        return current

    async def resolve_name(self, root_id: str, full_name: str) -> str:
        """Walk the catalogs along ``full_name`` from ``root_id``; grants no authority."""
        if full_name == ROOT:
            return root_id
        current = root_id
        for segment in full_name.split("/"):
            entry = next((e for e in await self.catalog_of(current) if e.version == 3 and e.name == segment), None)
            if entry is None:
                raise unknown_name(full_name)
            current = entry.child_id
        return current

    async def resolve_agent_argument(self, caller: Any, text: str) -> str:
        """A name (full, ``lead``, or ``lead/…``) or an in-tree session id → session id (spec 07 §7.6)."""
        name = text.strip()
        if name.startswith(f"{ROOT}/"):
            name = name[len(ROOT) + 1 :]
        root = await self.tree_root(caller.id)
        if name == ROOT:
            return root
        if name and all(is_segment(part) for part in name.split("/")):
            return await self.resolve_name(root, name)
        if name and await self.header_of(name) is not None and await self.tree_root(name) == root:
            return name
        raise unknown_name(text.strip())

    def reserve(self, parent: Any, requested: str | None) -> Reservation:
        """Reserve a child segment for ``parent`` synchronously (own catalog ∪ live reservations)."""
        return self.names.reserve(parent.id, self.taken_names(parent), requested)

    def taken_names(self, parent: Any) -> set[str]:
        """Names of ``parent``'s own catalog plus every extra sibling name (not its live reservations)."""
        taken = {e.name for e in parent.session.fold(CATALOG) if e.version == 3 and e.name}
        for extra in self.sibling_names:
            taken.update(extra(parent))
        return taken

    # -- creation -------------------------------------------------------------------------------

    async def start_activation(self, provider_name: str, request: StartRequest, reservation: Reservation) -> str:
        """The admission transaction of spec 07 §4.1; any failure before the catalog entry rolls back."""
        provider = self.providers.get(provider_name)
        if provider is None:
            raise SubagentError(f'subagent provider "{provider_name}" is not registered', "NO_PROVIDER")
        parent = request.parent
        if self.draining:
            raise SubagentError("subagent service is shutting down; no new work is accepted", "DRAINING")
        if self.ctx.get(SESSION_PERSISTENCE) is None:
            raise SubagentError("continuable subagents require session persistence", "PERSISTENCE_UNAVAILABLE")
        if self.ctx.get(SESSION_QUERY) is None:
            raise SubagentError("continuable subagents require session query", "CONTINUATION_UNAVAILABLE")
        depth = agent_depth(parent) + 1
        limit = self.config.maxDepth if request.max_depth is None else request.max_depth
        if limit >= 0 and depth > limit:
            raise SubagentError(f"subagent depth {depth} exceeds maxDepth {limit}", "DEPTH_EXCEEDED")
        root_id = await self.tree_root(parent.id)
        self._take_slot(root_id)
        try:
            return await self._create_child(provider, request, reservation, depth, root_id)
        except BaseException:
            self._release_slot(root_id)
            raise

    def _take_slot(self, root_id: str) -> None:
        used = self._slots.get(root_id, 0)
        limit = self.config.maxActiveSubagents
        if used >= limit:
            raise SubagentError(
                f"subagent limit reached (active child limit: {limit}); wait for an existing child to finish "
                "or complete this work with the current agents",
                "ACTIVATION_LIMIT_REACHED",
            )
        self._slots[root_id] = used + 1

    def _release_slot(self, root_id: str) -> None:
        left = self._slots.get(root_id, 0) - 1
        if left > 0:
            self._slots[root_id] = left
        else:
            self._slots.pop(root_id, None)

    def _child_route(self, parent: Any, request: StartRequest) -> AgentOptions:
        from pydsh.agent.loop import route_of

        chosen = request.agent_options or {}
        route = route_of(self.ctx, parent)
        return AgentOptions(
            provider=chosen.get("provider") or route["provider"] or None,
            model=chosen.get("model") or route["model"] or None,
            reasoning_effort=chosen.get("reasoningEffort"),
            max_tokens=chosen.get("maxTokens") or parent.options.max_tokens,
        )

    def _prefix(self, provider: Provider, request: StartRequest, options: AgentOptions) -> tuple[list[Event], int]:
        """The creation prefix: fork history, the descriptor and the delegated policy (spec 07 §4.3)."""
        parent = request.parent
        events: list[Event] = []
        inherited = 0
        if provider.inherits_parent_context:
            last_end = max((e["seq"] for e in parent.session.events if e["type"] == "turn/end"), default=None)
            if last_end is not None:
                events = self.sessions.fork_prefix(parent.session, last_end)
                inherited = last_end + 1
        time = now_ms()
        descriptor: dict[str, Any] = {"version": 3, "mode": "continuable" if request.continuable else "one-shot"}
        descriptor["provider"] = provider.name
        descriptor["label"] = request.label
        if request.continuable:
            if options.provider:
                descriptor["agentProvider"] = options.provider
            if options.model:
                descriptor["agentModel"] = options.model
            if options.reasoning_effort:
                descriptor["agentReasoningEffort"] = options.reasoning_effort
        records = [("subagent/descriptor", descriptor)]
        mode = _last(parent.session.events, "sandbox/mode", "mode")
        if mode is not None:
            records.append(("sandbox/mode", {"mode": mode, "source": "delegation"}))
        if self.ctx.get(APPROVAL) is not None:
            records.append(("approval/policy", {"policy": "never", "source": "delegation"}))
        if _last(parent.session.events, "permission/preset", "preset") == "danger-full-access":
            records.append(("permission/preset", {"preset": "danger-full-access"}))
        for etype, data in records:
            events.append(build_event(etype, len(events), time, data))
        return events, inherited

    def _parent_preset(self, parent: Agent) -> str | None:
        roster = self.ctx.get(AGENT_PRESETS)
        return roster.composed_preset(parent.ctx) if roster is not None else None

    def _join_parent_preset(self, parent: Agent) -> Setup | None:
        """A child joins the exact preset generation its parent runs (before it is published)."""
        roster = self.ctx.get(AGENT_PRESETS)
        if roster is None:
            return None

        def setup(child_ctx: Context, _child: Agent) -> None:
            roster.compose_from(child_ctx, parent.ctx)

        return setup

    async def _create_child(
        self, provider: Provider, request: StartRequest, reservation: Reservation, depth: int, root_id: str
    ) -> str:
        parent = request.parent
        child_id = request.child_id or new_session_id()
        if self.sessions.get(child_id) is not None or await self.header_of(child_id) is not None:
            raise SubagentError(f'subagent "{child_id}" already exists', "DUPLICATE_CHILD")
        cwd = self._child_cwd(parent, request.cwd)
        options = self._child_route(parent, request)
        options = AgentOptions(
            provider=options.provider,
            model=options.model,
            reasoning_effort=options.reasoning_effort,
            max_tokens=options.max_tokens,
            subagent_depth=depth,
        )
        prefix, inherited = self._prefix(provider, request, options)
        parent_name = await self.full_name(parent.id)
        handle = await self.agents.create(
            CreateAgentOptions(
                session_id=child_id,
                cwd=cwd,
                parent_session=parent.id,
                origin="subagent",
                delegation_depth=depth,
                prefix_events=prefix,
                inherited_event_count=inherited,
                agent_options=options,
                agent_preset=self._parent_preset(parent),
                setup=self._join_parent_preset(parent),
            )
        )
        child = handle.agent
        try:
            self.full_names[child_id] = child_full_name(parent_name, reservation.name, child_id)
            blocks = [{"type": "text", "text": request.prompt}]
            if request.continuable and request.return_guidance:
                blocks.append({"type": "text", "text": RETURN_GUIDANCE.format(parent=parent_name)})
            activation = Activation(child_id, parent.id, root_id, provider.name, handle, request.continuable)
            activation.epoch_start = len(child.session.events)
            activation.settled = asyncio.get_running_loop().create_future()
            self.activations[child_id] = activation
            child.followup(user_message(blocks))
        except BaseException:
            self.activations.pop(child_id, None)
            self.full_names.pop(child_id, None)
            await handle.abandon()
            raise
        entry = CatalogEntry(
            child_id,
            int(child.session.header["createdAt"]),
            3,
            "continuable" if request.continuable else "one-shot",
            request.label,
            reservation.name,
        )
        parent.session.append("subagent/catalog", catalog_event(entry))
        reservation.release()
        self._emit_start(activation)
        return child_id

    def _child_cwd(self, parent: Any, requested: str | None) -> str:
        base = self.ctx.require(WORKING_DIRECTORY).current(parent)
        if requested is None:
            return str(base)
        path = os.path.normpath(os.path.join(base, os.path.expanduser(requested)))
        if not os.path.isdir(path):
            raise SubagentError(f'subagent cwd does not exist: "{path}"', "INVALID_CWD")
        return path

    def _emit_start(self, activation: Activation) -> None:
        payload = SubagentStart(
            run_id=activation.run_id,
            provider=activation.provider,
            id=activation.child_id,
            local=True,
            parent_id=activation.parent_id,
        )
        self.ctx.emit(SUBAGENT_START, payload)

    # -- settlement -----------------------------------------------------------------------------

    def on_status(self, payload: AgentStatus) -> None:
        """A child going idle may settle its activation (and then its parent's)."""
        if payload["status"] == "idle" and payload["agent"].id in self.activations:
            self._check(payload["agent"].id)

    def _quiet(self, activation: Activation) -> bool:
        agent = activation.agent
        if agent.status != "idle" or agent.inbox.has_pending:
            return False
        return not any(a.parent_id == activation.child_id for a in self.activations.values())

    def _check(self, child_id: str) -> None:
        activation = self.activations.get(child_id)
        if activation is None or activation.settling is not None or not self._quiet(activation):
            return
        activation.settling = asyncio.get_running_loop().create_task(self._settle(activation))

    async def _settle(self, activation: Activation) -> None:
        await asyncio.sleep(0)
        if not self._quiet(activation):
            activation.settling = None
            return
        agent = activation.agent
        events = agent.session.events[activation.epoch_start :]
        reason = stop_reason(events)
        content = closing_content(events)
        try:
            if activation.continuable:
                self._notify_parent(activation, reason, content, await self.full_name(activation.child_id))
        except Exception:
            log.warning("settlement notice for %s failed", activation.child_id, exc_info=True)
        payload = SubagentEnd(
            run_id=activation.run_id,
            provider=activation.provider,
            id=activation.child_id,
            local=True,
            stop_reason=reason,
            parent_id=activation.parent_id,
        )
        if content:
            payload["last_assistant_message"] = content
        self.ctx.emit(SUBAGENT_END, payload)
        try:
            await activation.handle.dispose()
        finally:
            self._forget(activation, {"stop_reason": reason, "content": content})

    def _forget(self, activation: Activation, result: dict[str, Any]) -> None:
        if self.activations.get(activation.child_id) is activation:
            del self.activations[activation.child_id]
            self._release_slot(activation.root_id)
        if activation.settled is not None and not activation.settled.done():
            activation.settled.set_result(result)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        if activation.parent_id in self.activations:
            self._check(activation.parent_id)

    def _notify_parent(self, activation: Activation, reason: str, content: list[dict[str, Any]], name: str) -> None:
        parent = self.agents.get(activation.parent_id)
        if parent is None:
            log.info("parent of %s is not live; settlement notice dropped", activation.child_id)
            return
        template = SUMMARIES.get(
            reason, "Background subagent {name} ended abnormally (" + reason + ") before it finished."
        )
        summary = template.format(name=name)
        blocks = [{"type": "text", "text": summary}]
        texts = [b for b in content if b.get("type") == "text" and b.get("text")]
        if texts:
            blocks.append({"type": "text", "text": "Its closing message:"})
            blocks.extend({"type": "text", "text": b["text"]} for b in texts)
        else:
            blocks.append({"type": "text", "text": "It left no closing message."})
        source = {
            "kind": "subagent-settled",
            "form": "notice",
            "summary": _cut(summary, SUMMARY_LIMIT),
            "senderSessionId": activation.child_id,
        }
        message = user_message(blocks, source)
        if getattr(parent, "disposed", False):
            parent.inject(message)
        elif parent.status == "idle":
            parent.followup(message)
        else:
            parent.steer(message)

    async def wait_for_children(self, agent: Any) -> bool:
        """Wait until ``agent``'s managed descendants settled; ``False`` when none were pending."""
        waited = False
        while self.descendants(agent.id):
            waited = True
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        return waited

    def descendants(self, agent_id: str) -> list[Activation]:
        """The resident activations below ``agent_id``, nearest first."""
        out = []
        frontier = {agent_id}
        while frontier:
            children = [a for a in self.activations.values() if a.parent_id in frontier]
            out.extend(children)
            frontier = {a.child_id for a in children}
        return out

    async def drain_child(self, child_id: str) -> None:
        """Dispose one resident activation and its descendants (a start that must not stand)."""
        activation = self.activations.get(child_id)
        if activation is None:
            return
        await self.drain([child_id])
        if self.activations.get(child_id) is activation:
            try:
                await activation.handle.dispose()
            finally:
                self._forget(activation, {"stop_reason": "aborted", "content": []})

    async def drain(self, agent_ids: Iterable[str] | None = None) -> None:
        """Dispose resident activations (below ``agent_ids``, or all), deepest first."""
        if agent_ids is None:
            targets = list(self.activations.values())
        else:
            targets = [a for agent_id in agent_ids for a in self.descendants(agent_id)]
        failures: list[tuple[Activation, Exception]] = []
        for activation in sorted(targets, key=lambda a: -agent_depth(a.agent)):
            try:
                await activation.handle.dispose()
            except Exception as exc:
                failures.append((activation, exc))
            self._forget(activation, {"stop_reason": "aborted", "content": []})
        if failures:
            failed, error = failures[0]
            name = await self.full_name(failed.child_id)
            raise SubagentError(f'subagent "{name}" activation teardown failed: {error}', "ACTIVATION_TEARDOWN_FAILED")

    # -- delivery -------------------------------------------------------------------------------

    async def _resident(self, target_id: str) -> Activation | None:
        activation = self.activations.get(target_id)
        if activation is not None and activation.settling is not None:
            await asyncio.shield(activation.settling)
            activation = self.activations.get(target_id)
        return activation

    async def deliver_to_child(self, sender: Any, target_id: str, text: str) -> str:
        """Frame and steer a message to ``sender``'s direct continuable child, cold-resuming it if needed."""
        header = await self.header_of(target_id)
        target_name = await self.full_name(target_id)
        if header is None:
            raise SubagentError(f'subagent "{target_name}" is unavailable', "NOT_RESUMABLE")
        if header.get("parentSession") != sender.id or header.get("origin") != "subagent":
            raise SubagentError(
                f'subagent "{target_name}" is not a direct child of agent "{await self.full_name(sender.id)}"',
                "UNAUTHORIZED",
            )
        message = self._framed(sender, text, await self.full_name(sender.id))
        await self.deliver(sender, target_id, message)
        return str(message["id"])

    async def deliver(self, parent: Any, target_id: str, message: dict[str, Any]) -> None:
        """Steer an already framed ``message`` to ``parent``'s child, cold-resuming it if needed (spec 07 §5.2).

        The caller has authorized the delivery on ``parent``'s authority as the durable direct parent.
        """
        activation = await self._resident(target_id)
        if activation is None:
            activation = await self._cold_resume(parent, target_id, await self.full_name(target_id))
        activation.agent.steer(message)

    def _framed(self, sender: Any, text: str, sender_name: str) -> dict[str, Any]:
        source = {"kind": "agent-message", "form": "relay", "senderSessionId": sender.id}
        return user_message(f"Agent {sender_name} sent a message: {text}", source)

    async def deliver_to_parent(self, sender: Any, text: str) -> tuple[str, str]:
        """A resident continuable child steers its direct parent; returns (message id, parent name)."""
        parent_id = str(sender.session.header.get("parentSession"))
        parent_name = await self.full_name(parent_id)
        activation = self.activations.get(sender.id)
        if activation is None or not activation.continuable:
            raise SubagentError(
                f'agent "{await self.full_name(sender.id)}" is not a resident continuable child and cannot send '
                f'to parent "{parent_name}"',
                "UNAUTHORIZED",
            )
        parent = self.agents.get(parent_id)
        if parent is None:
            raise SubagentError("direct parent is not live; the message was not delivered", "PARENT_UNAVAILABLE")
        message = self._framed(sender, text, await self.full_name(sender.id))
        parent.steer(message)
        return str(message["id"]), parent_name

    async def _cold_resume(self, sender: Any, target_id: str, target_name: str) -> Activation:
        """Bring a persisted continuable child back (spec 07 §5.5): no new descriptor or catalog entry."""
        try:
            session = await self._session(target_id)
        except (OSError, SessionError) as exc:
            raise SubagentError(f'subagent "{target_name}" is unavailable: {exc}', "NOT_RESUMABLE") from exc
        if session is None:
            raise SubagentError(f'subagent "{target_name}" is unavailable', "NOT_RESUMABLE")
        own = session.events[session.inherited_event_count :]
        descriptor = next((e["data"] for e in own if e["type"] == "subagent/descriptor"), None)
        if descriptor is None or descriptor.get("mode") != "continuable":
            raise SubagentError(
                f'subagent "{target_name}" has no supported continuation state and cannot be resumed; '
                "choose a different target",
                "NOT_RESUMABLE",
            )
        root_id = await self.tree_root(target_id)
        self._take_slot(root_id)
        try:
            options = AgentOptions(
                provider=descriptor.get("agentProvider"),
                model=descriptor.get("agentModel"),
                reasoning_effort=descriptor.get("agentReasoningEffort"),
                max_tokens=sender.options.max_tokens,
                subagent_depth=int(session.header.get("delegationDepth") or 0),
            )
            handle = await self.agents.resume(target_id, agent_options=options)
        except BaseException:
            self._release_slot(root_id)
            raise
        activation = Activation(target_id, sender.id, root_id, str(descriptor.get("provider")), handle, True)
        activation.epoch_start = len(handle.agent.session.events)
        activation.settled = asyncio.get_running_loop().create_future()
        self.activations[target_id] = activation
        self._emit_start(activation)
        return activation

    # -- interrupt ------------------------------------------------------------------------------

    async def interrupt(self, caller: Any, target_id: str) -> None:
        """Abort a descendant's current turn, keeping its queued input (spec 07 §5.7)."""
        target_name = await self.full_name(target_id)
        caller_name = await self.full_name(caller.id)
        if target_id == caller.id:
            raise SubagentError(f'agent "{caller_name}" cannot interrupt itself', "UNAUTHORIZED")
        if not await self._is_descendant(target_id, caller.id):
            raise SubagentError(
                f'subagent "{target_name}" is not a live descendant of agent "{caller_name}"', "UNAUTHORIZED"
            )
        activation = self.activations.get(target_id)
        if activation is not None:
            activation.agent.cancel({"kind": "parent"}, keep_inbox=True)

    async def _is_descendant(self, target_id: str, ancestor_id: str) -> bool:
        current = target_id
        for _ in range(1000):
            header = await self.header_of(current)
            if header is None or header.get("origin") != "subagent":
                return False
            current = str(header.get("parentSession"))
            if current == ancestor_id:
                return True
        return False


def child_full_name(parent_name: str, segment: str, child_id: str) -> str:
    """A child's full name: its segment below the root, a path below a named parent, else its id."""
    if parent_name == ROOT:
        return segment
    if all(is_segment(part) for part in parent_name.split("/")):
        return f"{parent_name}/{segment}"
    return child_id


def _last(events: list[Event], event_type: str, key: str) -> Any:
    for event in reversed(events):
        if event["type"] == event_type:
            return event["data"].get(key)
    return None


name = "subagent"
inject = (AGENTS, SESSIONS, SYSTEM_PROMPT)
optional = (USER_QUESTIONS,)


def apply(ctx: Context, config: Config) -> None:
    service = SubagentService(ctx, config)
    ctx.provide(SUBAGENTS, service)
    ctx.on(AGENT_STATUS, service.on_status)
    questions = ctx.get(USER_QUESTIONS)
    if questions is not None:
        questions.add_owner_check(ctx, lambda agent: agent.id in service.activations)
    ctx.require(SYSTEM_PROMPT).context(
        ctx,
        "subagent:delegation",
        120,
        lambda agent: DELEGATION_CONTEXT if agent is not None and agent.session.header.get("origin") else None,
        interpolate=False,
    )

    async def drain() -> None:
        service.draining = True
        await service.drain()

    ctx.effect(lambda: drain)
