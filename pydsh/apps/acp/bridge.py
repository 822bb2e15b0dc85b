"""The ACP bridge: an ``acp.Agent`` that drives pydsh agents for an editor (spec 11 Part A).

Each ACP session is one top-level pydsh agent. Session updates are derived from the agent's
committed log events and delivered in log order through one queue per session; approvals of
those agents are asked of the editor. Imported only when the ``acp`` row activates.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    CloseSessionResponse,
    ConfigOptionUpdate,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    ToolCallUpdate,
    UsageUpdate,
)

from pydsh import __version__
from pydsh.agent.agent import Agent, AgentOptions
from pydsh.agent.loop import error_chain
from pydsh.agent.model_selection import ModelSelection, Route, install_model_selection
from pydsh.agent.presets import header_preset, preset_setup
from pydsh.agent.registry import AgentHandle, CreateAgentOptions, Setup
from pydsh.apps.acp_wire import (
    absolute_cwd,
    admit_prompt,
    assistant_updates,
    decode_cursor,
    encode_cursor,
    internal,
    invalid,
    listable,
    listing_key,
    logged_route,
    mcp_configs,
    resume_problem,
    same_directory,
    stop_reason,
    tool_call_update,
    tool_result_update,
)
from pydsh.kernel import services
from pydsh.kernel.context import Context
from pydsh.llm.types import LlmError
from pydsh.session.errors import SessionPersistenceNotFoundError
from pydsh.session.events import Event
from pydsh.session.log import Session

if TYPE_CHECKING:
    from acp import Client
    from acp.schema import ClientCapabilities

    from pydsh.policy.approval import ApprovalRequest
    from pydsh.tools.mcp import McpUnavailableError

log = logging.getLogger("pydsh.acp")

DISPOSED = "the ACP bridge has been disposed"
PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
]


@dataclass
class Selection:
    """A session's model route as the editor chose it; ``effort`` ``None`` = the model's default."""

    provider: str
    model: str
    effort: str | None = None

    def route(self) -> Route:
        return Route(self.provider, self.model, self.effort)


@dataclass
class PromptState:
    """What settles one ``session/prompt``: the claiming turn, its end, failures and cancellation."""

    message_id: str
    turn: int | None = None
    reason: dict[str, Any] | None = None
    failure: str | None = None
    delivery_failure: str | None = None
    cancelled: bool = False


Update = Any
ConfigOptions = list[SessionConfigOptionSelect | SessionConfigOptionBoolean]
Producer = Callable[[], Awaitable[Update | None]]


@dataclass
class Delivery:
    make: Producer
    assistant: bool = False


class DeliveryQueue:
    """One ordered worker that sends a session's updates; ``drain`` waits until all queued were sent."""

    def __init__(
        self, send: Callable[[Update], Awaitable[None]], failed: Callable[[Delivery, Exception], None]
    ) -> None:
        self._send = send
        self._failed = failed
        self._items: asyncio.Queue[Delivery] = asyncio.Queue()
        self._worker = asyncio.ensure_future(self._run())
        self._closed = False

    def put(self, update: Update, assistant: bool = False) -> None:
        async def ready() -> Update:
            return update

        self.put_later(ready, assistant)

    def put_later(self, make: Producer, assistant: bool = False) -> None:
        if not self._closed:
            self._items.put_nowait(Delivery(make, assistant))

    async def drain(self) -> None:
        await self._items.join()

    async def _run(self) -> None:
        while True:
            item = await self._items.get()
            try:
                update = await item.make()
                if update is not None:
                    await self._send(update)
            except Exception as exc:
                self._failed(item, exc)
            finally:
                self._items.task_done()

    def close(self) -> None:
        """Stop sending; whatever is still queued is dropped, so no ``drain`` waits for it."""
        self._closed = True
        self._worker.cancel()
        while not self._items.empty():
            self._items.get_nowait()
            self._items.task_done()


@dataclass
class BridgeSession:
    """One ACP session: its agent, route selection, delivery queue and prompt in flight."""

    handle: AgentHandle
    selection: Selection | None
    queue: DeliveryQueue
    model_selection: ModelSelection = field(default_factory=ModelSelection)
    prompt: PromptState | None = None
    config_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: asyncio.Task[None] | None = None

    @property
    def agent(self) -> Agent:
        return self.handle.agent

    @property
    def id(self) -> str:
        return self.agent.id


def _detail(exc: BaseException) -> str:
    return exc.message if isinstance(exc, LlmError) else error_chain(exc)


def _guarded(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn any failure other than a ``RequestError`` into an internal error naming it."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except RequestError:
            raise
        except Exception as exc:
            log.debug("ACP %s failed", method.__name__, exc_info=True)
            raise internal(_detail(exc)) from exc

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class Bridge:
    """The ``acp.Agent`` of ``pydsh acp``; unsupported methods are left undefined (``-32601``)."""

    def __init__(self, ctx: Context, page_size: int, default: Selection | None) -> None:
        self.ctx = ctx
        self.page_size = page_size
        self.default = default
        self.conn: Client | None = None
        self.sessions: dict[str, BridgeSession] = {}
        self._resuming: set[str] = set()
        self.disposed = False
        self.mcp_warned = False
        ctx.on("session/event", self._on_event)
        ctx.on("agent/inbox/claimed", self._on_claimed)
        ctx.on("agent/error", self._on_error)
        ctx.on("llm/adapters-updated", self._on_adapters)
        approval = ctx.get("approval")
        if approval is not None:
            approval.add_answerer(ctx, self._answer_approval)

    def on_connect(self, conn: Client) -> None:
        self.conn = conn

    def _live(self) -> None:
        if self.disposed:
            raise internal(DISPOSED)

    def _client(self) -> Client:
        if self.conn is None:
            raise RuntimeError("the ACP client connection is not established")
        return self.conn

    # -- initialize ---------------------------------------------------------------------------

    @_guarded
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Always protocol version 1 (single-version), whatever the client proposes."""
        self._live()
        capabilities = AgentCapabilities(
            mcp_capabilities=McpCapabilities(http=True),
            prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=False),
            session_capabilities=SessionCapabilities(
                close=SessionCloseCapabilities(), list=SessionListCapabilities(), resume=SessionResumeCapabilities()
            ),
        )
        return InitializeResponse(
            protocol_version=1,
            agent_info=Implementation(name="pydsh-acp", version=__version__),
            agent_capabilities=capabilities,
            auth_methods=[],
        )

    @_guarded
    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        self._live()
        return AuthenticateResponse()

    # -- opening sessions ---------------------------------------------------------------------

    @_guarded
    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        """A new top-level agent and session in ``cwd``, flushed to disk before the answer."""
        self._live()
        absolute_cwd(cwd)
        if additional_directories:
            raise invalid("additionalDirectories is not supported")
        selection = self.default
        options = AgentOptions(provider=selection.provider, model=selection.model) if selection else AgentOptions()
        create = CreateAgentOptions(
            cwd=cwd,
            agent_options=options,
            agent_preset=header_preset(self.ctx, None),
            setup=self._setup(mcp_configs(mcp_servers or [], cwd), cwd),
        )
        handle = await services.agents(self.ctx).create(create)
        entry = await self._adopt(handle, selection and Selection(selection.provider, selection.model))
        return NewSessionResponse(session_id=entry.id, config_options=await self._config_options(entry))

    @_guarded
    async def resume_session(
        self,
        cwd: str,
        session_id: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> ResumeSessionResponse:
        """Reopen a persisted top-level session on its logged route; no input is sent."""
        self._live()
        absolute_cwd(cwd)
        if additional_directories:
            raise invalid("additionalDirectories is not supported")
        live = services.sessions(self.ctx).get(session_id) is not None
        if session_id in self.sessions or session_id in self._resuming or live:
            raise invalid(f"session is already active: {session_id}")
        self._resuming.add(session_id)
        try:
            return await self._resume(cwd, session_id, mcp_servers or [])
        finally:
            self._resuming.discard(session_id)

    async def _resume(self, cwd: str, session_id: str, mcp_servers: list[Any]) -> ResumeSessionResponse:
        persistence = self.ctx.get("session_persistence")
        try:
            if persistence is None:
                raise SessionPersistenceNotFoundError(session_id)
            header = (await persistence.stat(session_id))["header"]
        except SessionPersistenceNotFoundError:
            raise invalid(f"session is not resumable: {session_id}") from None
        if resume_problem(header):
            raise invalid(f"session is not resumable: {session_id}")
        stored = header.get("cwd")
        if not isinstance(stored, str) or not same_directory(stored, cwd):
            raise invalid(f"session cwd does not match: {cwd}")
        setup = self._setup(mcp_configs(mcp_servers, stored), stored)
        handle = await services.agents(self.ctx).resume(session_id, setup=setup)
        logged = logged_route(handle.agent.session.request_header())
        selection = Selection(*logged) if logged is not None else self.default and Selection(**vars(self.default))
        entry = await self._adopt(handle, selection)
        return ResumeSessionResponse(config_options=await self._config_options(entry))

    def _setup(self, servers: list[dict[str, Any]], cwd: str) -> Setup:
        """The creation setup: join the session's preset, then mount the client's MCP servers in its scope."""
        join = preset_setup(self.ctx)

        async def setup(agent_ctx: Context, agent: Agent) -> None:
            await join(agent_ctx, agent)
            if servers:
                from pydsh.tools.mcp import McpConfigError, McpUnavailableError, mount_servers

                try:
                    await mount_servers(agent_ctx, servers, cwd=cwd)
                except McpConfigError as exc:
                    raise invalid(str(exc)) from None
                except McpUnavailableError as exc:
                    self._mcp_missing(exc)

        return setup

    def _mcp_missing(self, exc: McpUnavailableError) -> None:
        """The editor declared MCP servers but the extra is absent: warn once, run without their tools."""
        if not self.mcp_warned:
            self.mcp_warned = True
            log.warning("the editor's MCP servers are not mounted: %s", exc)

    async def _adopt(self, handle: AgentHandle, selection: Selection | None) -> BridgeSession:
        """Own a freshly opened agent: route selection, delivery queue, durable log; undone on failure."""
        sessions = self.sessions
        session_id = handle.agent.id

        def failed(item: Delivery, exc: Exception) -> None:
            owner = sessions.get(session_id)
            self._delivery_failed(owner.prompt if owner is not None and item.assistant else None, exc)

        entry = BridgeSession(handle, selection, DeliveryQueue(self._sender(session_id), failed))
        try:
            install_model_selection(handle.agent.ctx, entry.model_selection, owner=self.ctx)
            await services.sessions(self.ctx).flush(handle.agent.session)
            if self.disposed:
                raise internal(DISPOSED)
        except BaseException:
            entry.queue.close()
            await handle.dispose()
            raise
        self.sessions[entry.id] = entry
        return entry

    # -- session/list -------------------------------------------------------------------------

    @_guarded
    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> Any:
        """Persisted top-level sessions not open in this process, newest first, one page at a time."""
        self._live()
        if cwd is not None:
            absolute_cwd(cwd)
        after = listing_key(*decode_cursor(cursor)) if cursor is not None else None
        persistence = self.ctx.get("session_persistence")
        stored: list[dict[str, Any]] = await persistence.list() if persistence is not None else []
        headers = [row["header"] for row in stored if isinstance(row.get("header"), dict)]
        live = services.sessions(self.ctx)
        rows = [
            h
            for h in headers
            if listable(h) and live.get(h["id"]) is None and (cwd is None or same_directory(h["cwd"], cwd))
        ]
        rows.sort(key=lambda h: listing_key(h["createdAt"], h["id"]))
        if after is not None:
            rows = [h for h in rows if listing_key(h["createdAt"], h["id"]) > after]
        page = rows[: self.page_size]
        more = len(rows) > len(page)
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=h["id"], cwd=h["cwd"]) for h in page],
            next_cursor=encode_cursor(page[-1]["createdAt"], page[-1]["id"]) if more else None,
        )

    # -- session/close and teardown -----------------------------------------------------------

    @_guarded
    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        self._live()
        entry = self.sessions.get(session_id)
        if entry is None:
            raise invalid(f"unknown session: {session_id}")
        try:
            await self._teardown(entry)
        except Exception as exc:
            raise internal(f"session close failed: {_detail(exc)}") from exc
        return CloseSessionResponse()

    def _teardown(self, entry: BridgeSession) -> asyncio.Task[None]:
        if entry.closing is None:
            entry.closing = asyncio.ensure_future(self._close(entry))
        return entry.closing

    async def _close(self, entry: BridgeSession) -> None:
        """Cancel, wait for idle, drain updates and descendants, flush, dispose (spec 11 §A.9)."""
        agent = entry.agent
        errors: list[BaseException] = []
        if entry.prompt is not None:
            entry.prompt.cancelled = True
        agent.cancel({"kind": "user"})
        await agent.when_idle()
        await entry.queue.drain()
        subagents = self.ctx.get("subagents")
        steps: list[Callable[[], Awaitable[Any]]] = []
        if subagents is not None:
            steps.append(lambda: subagents.drain([agent.id]))
        steps += [lambda: services.sessions(self.ctx).flush(agent.session), entry.handle.dispose]
        for step in steps:
            try:
                await step()
            except Exception as exc:
                errors.append(exc)
        entry.queue.close()
        if self.sessions.get(entry.id) is entry:
            del self.sessions[entry.id]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup("closing the session failed", [e for e in errors if isinstance(e, Exception)])

    async def dispose(self) -> list[str]:
        """End of input: refuse further requests and close every owned session; the failures."""
        self.disposed = True
        entries = list(self.sessions.values())
        results = await asyncio.gather(*(self._teardown(e) for e in entries), return_exceptions=True)
        return [f"session {e.id}: {_detail(r)}" for e, r in zip(entries, results, strict=True) if r is not None]

    # -- prompts ------------------------------------------------------------------------------

    def _entry(self, session_id: str) -> BridgeSession:
        entry = self.sessions.get(session_id)
        if entry is None:
            raise invalid(f"unknown session: {session_id}")
        if entry.closing is not None:
            raise invalid(f"session is closing: {session_id}")
        return entry

    @_guarded
    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        """Queue the prompt as the agent's next turn and answer once everything it started settled."""
        self._live()
        entry = self._entry(session_id)
        if entry.prompt is not None:
            raise invalid("a prompt is already in flight for this session")
        message = admit_prompt(prompt)
        state = entry.prompt = PromptState(message["id"])
        try:
            if entry.selection is not None:
                entry.model_selection.current = entry.selection.route()
            entry.agent.followup(message)
            await self._settle(entry)
            if state.cancelled:
                return PromptResponse(stop_reason="cancelled")
            if state.delivery_failure is not None:
                raise internal(f"assistant output delivery failed: {state.delivery_failure}")
            if state.failure is not None:
                raise internal(f"turn failed: {state.failure}")
            return PromptResponse(stop_reason=stop_reason(state.reason))
        except asyncio.CancelledError:
            state.cancelled = True
            entry.agent.cancel({"kind": "user"})
            raise
        finally:
            if entry.prompt is state:
                entry.prompt = None

    async def _settle(self, entry: BridgeSession) -> None:
        """Until the agent is idle at an unchanged position, its descendants finished and updates sent."""
        agent = entry.agent
        subagents = self.ctx.get("subagents")
        while True:
            await agent.when_idle()
            position = agent.session.seq
            waited = bool(await subagents.wait_for_children(agent)) if subagents is not None else False
            await entry.queue.drain()
            if not waited and agent.status == "idle" and agent.session.seq == position:
                return

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Cancel the prompt in flight, else the agent's autonomous work; unknown ids are ignored."""
        entry = self.sessions.get(session_id)
        if entry is None or self.disposed:
            return
        if entry.prompt is not None:
            entry.prompt.cancelled = True
        entry.agent.cancel({"kind": "user"})

    # -- config options -----------------------------------------------------------------------

    async def _config_options(self, entry: BridgeSession) -> ConfigOptions:
        selection = entry.selection
        if selection is None:
            return []
        options: ConfigOptions = [await self._model_option(selection)]
        effort = await self._effort_option(selection)
        if effort is not None:
            options.append(effort)
        return options

    async def _model_option(self, selection: Selection) -> SessionConfigOptionSelect:
        llm = self.ctx.require("llm")
        groups: list[SessionConfigSelectGroup] = []
        for provider, models in await llm.catalogs():
            pid = provider["id"]
            entries = [_model_entry(pid, m) for m in models]
            if pid == selection.provider and all(m["id"] != selection.model for m in models):
                current = SessionConfigSelectOption(value=_route_value(pid, selection.model), name=selection.model)
                entries.insert(0, current)
            if entries:
                groups.append(SessionConfigSelectGroup(group=pid, name=provider["name"], options=entries))
        return SessionConfigOptionSelect(
            id="model",
            name="Model",
            category="model",
            type="select",
            current_value=_route_value(selection.provider, selection.model),
            options=groups,
        )

    async def _reasoning(self, provider: str, model: str) -> dict[str, Any] | None:
        llm = self.ctx.require("llm")
        try:
            info = await llm.resolve_model_info(provider, model)
        except LlmError:
            return None
        reasoning: dict[str, Any] | None = info.get("reasoning")
        return reasoning

    async def _effort_option(self, selection: Selection) -> SessionConfigOptionSelect | None:
        reasoning = await self._reasoning(selection.provider, selection.model)
        if not reasoning:
            return None
        default = reasoning.get("defaultEffort")
        values = [] if default is not None else [SessionConfigSelectOption(value="", name="Provider default")]
        for effort in reasoning["efforts"]:
            described = {"description": effort["description"]} if effort.get("description") else {}
            values.append(SessionConfigSelectOption(value=effort["id"], name=effort["name"], **described))
        return SessionConfigOptionSelect(
            id="reasoning_effort",
            name="Reasoning effort",
            category="thought_level",
            type="select",
            current_value=selection.effort or default or "",
            options=values,
        )

    @_guarded
    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """Select the model or reasoning effort of later prompts (serialised per session)."""
        self._live()
        entry = self._entry(session_id)
        async with entry.config_lock:
            if config_id not in ("model", "reasoning_effort"):
                raise invalid(f"unknown session config option: {config_id}")
            if not isinstance(value, str):
                raise invalid(f"{config_id} requires a select value")
            current = entry.selection
            if current is None:
                raise invalid("this session has no model selection")
            chosen = await (self._choose_model if config_id == "model" else self._choose_effort)(current, value)
            llm = self.ctx.require("llm")
            config: dict[str, Any] = {"provider": chosen.provider, "model": chosen.model}
            if chosen.effort is not None:
                config["reasoningEffort"] = chosen.effort
            try:
                await llm.resolve_call_config(config)
            except LlmError as exc:
                raise invalid(exc.message) from None
            entry.selection = chosen
            return SetSessionConfigOptionResponse(config_options=await self._config_options(entry))

    async def _choose_model(self, current: Selection, value: str) -> Selection:
        option = await self._model_option(current)
        offered = {
            o.value for group in option.options if isinstance(group, SessionConfigSelectGroup) for o in group.options
        }
        if value not in offered:
            raise invalid(f"unknown model option: {value}")
        provider, model = json.loads(value)
        return Selection(provider, model)

    async def _choose_effort(self, current: Selection, value: str) -> Selection:
        option = await self._effort_option(current)
        offered = {o.value for o in option.options if isinstance(o, SessionConfigSelectOption)} if option else set()
        if value not in offered:
            raise invalid(f"unknown reasoning effort for {current.provider}/{current.model}: {value}")
        return Selection(current.provider, current.model, value or None)

    # -- updates ------------------------------------------------------------------------------

    def _sender(self, session_id: str) -> Callable[[Update], Awaitable[None]]:
        async def send(update: Update) -> None:
            await self._client().session_update(session_id, update)

        return send

    def _delivery_failed(self, prompt: PromptState | None, exc: Exception) -> None:
        """A failed update: assistant output fails the settling prompt; anything else is logged and skipped."""
        if prompt is not None and prompt.delivery_failure is None:
            prompt.delivery_failure = _detail(exc)
        if self.disposed:
            log.debug("dropped an ACP update after the connection closed: %s", exc)
            return
        log.warning("delivering an ACP session update failed: %s", _detail(exc))

    def _owned(self, session: Session) -> BridgeSession | None:
        entry = self.sessions.get(session.id)
        return entry if entry is not None and entry.agent.session is session else None

    def _on_event(self, session: Session, event: Event) -> None:
        entry = self._owned(session)
        if entry is None:
            return
        etype = event["type"]
        if etype == "assistant/message":
            self._assistant_output(entry, session, event)
        elif etype == "tool/call":
            entry.queue.put(tool_call_update(event))
        elif etype == "tool/result" and event.get("surfaceOp") == "append":
            entry.queue.put(tool_result_update(event))
        elif etype == "turn/end":
            prompt = entry.prompt
            if prompt is not None and prompt.turn is not None and event["data"]["turn"] >= prompt.turn:
                prompt.reason = dict(event["data"]["reason"])

    def _assistant_output(self, entry: BridgeSession, session: Session, event: Event) -> None:
        """Chunks of an assistant message, then the usage update; a failure is kept for the prompt."""
        try:
            for update in assistant_updates(event):
                entry.queue.put(update, assistant=True)
        except Exception as exc:
            self._delivery_failed(entry.prompt, exc)
            return
        context = session.request_context() or {}
        window = context.get("contextWindow")
        meter = self.ctx.get("token_meter")
        if event["data"].get("usage") is not None and window and meter is not None:
            used = meter.measure(session).total_tokens
            entry.queue.put(UsageUpdate(session_update="usage_update", used=used, size=int(window)))

    def _on_claimed(self, payload: dict[str, Any]) -> None:
        entry = self.sessions.get(payload["agent"].id)
        prompt = entry.prompt if entry is not None else None
        if prompt is not None and payload["message"]["id"] == prompt.message_id:
            prompt.turn = payload["turn"]

    def _on_error(self, payload: dict[str, Any]) -> None:
        agent = payload["agent"]
        entry = self.sessions.get(agent.id)
        prompt = entry.prompt if entry is not None and entry.agent is agent else None
        if prompt is not None and prompt.turn is not None and payload["turn"] >= prompt.turn:
            prompt.failure = _detail(payload["error"])

    def _on_adapters(self, payload: dict[str, Any]) -> None:
        for entry in self.sessions.values():

            async def options(entry: BridgeSession = entry) -> Update:
                return ConfigOptionUpdate(
                    session_update="config_option_update", config_options=await self._config_options(entry)
                )

            entry.queue.put_later(options)

    # -- approvals ----------------------------------------------------------------------------

    async def _answer_approval(self, request: ApprovalRequest) -> str | None:
        """Ask the editor about an owned agent's tool call, after it has seen the ``tool_call`` update."""
        entry = self.sessions.get(request.agent.id)
        if entry is None or entry.agent is not request.agent or request.call_id is None or self.disposed:
            return None
        await entry.queue.drain()
        meta = {"reason": request.reason} if request.reason else {}
        response = await self._client().request_permission(
            session_id=entry.id,
            tool_call=ToolCallUpdate(tool_call_id=request.call_id),
            options=PERMISSION_OPTIONS,
            **meta,
        )
        outcome = response.outcome
        if outcome.outcome == "cancelled":
            return "cancelled"
        return "allowed-once" if getattr(outcome, "option_id", None) == "allow-once" else "rejected"


def _route_value(provider: str, model: str) -> str:
    return json.dumps([provider, model], separators=(",", ":"), ensure_ascii=False)


def _model_entry(provider: str, info: dict[str, Any]) -> SessionConfigSelectOption:
    described = {"description": info["description"]} if info.get("description") else {}
    return SessionConfigSelectOption(value=_route_value(provider, info["id"]), name=info["name"], **described)
