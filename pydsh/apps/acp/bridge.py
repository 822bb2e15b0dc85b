"""The ACP bridge: an ``acp.Agent`` whose sessions are root agents of the host (spec 11 Part A).

Each ACP session is one root agent the host opened; the editor hears about it through ``updates.py``
and picks its model through ``options.py``. Imported only when the ``acp`` row activates.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from acp import RequestError
from acp.schema import (
    AgentCapabilities,
    AuthenticateResponse,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
)

from pydsh import __version__
from pydsh.agent.model_selection import install_model_selection
from pydsh.apps.acp.options import ModelOptions, Selection, check_choice
from pydsh.apps.acp.updates import BridgeSession, PromptState, Updates, detail
from pydsh.apps.acp.wire import (
    StopReason,
    absolute_cwd,
    admit_prompt,
    decode_cursor,
    encode_cursor,
    internal,
    invalid,
    listable,
    listing_key,
    logged_route,
    mcp_configs,
    same_directory,
    stop_reason,
)
from pydsh.host import AgentSpec, HostError, RunResult
from pydsh.host.host import resume_refusal
from pydsh.session.ids import session_id_problem
from pydsh.session.keys import SESSION_PERSISTENCE

if TYPE_CHECKING:
    from acp import Client
    from acp.schema import ClientCapabilities

    from pydsh.host import Agent, Host
    from pydsh.kernel.context import Context
    from pydsh.tools.mcp import McpUnavailableError

log = logging.getLogger("pydsh.acp")

DISPOSED = "the ACP bridge has been disposed"


def _guarded(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Turn any failure other than a ``RequestError`` into an internal error naming it."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except RequestError:
            raise
        except Exception as exc:
            log.debug("ACP %s failed", method.__name__, exc_info=True)
            raise internal(detail(exc)) from exc

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class Bridge:
    """The ``acp.Agent`` of ``pydsh acp``; unsupported methods are left undefined (``-32601``)."""

    def __init__(self, host: Host, page_size: int, default: Selection | None) -> None:
        self.host = host
        self.ctx: Context = host.ctx
        self.page_size = page_size
        self.default = default
        self.sessions: dict[str, BridgeSession] = {}
        self.options = ModelOptions(self.ctx)
        self.updates = Updates(self.ctx, self.sessions, self.options)
        self.disposed = False
        self.mcp_warned = False

    def on_connect(self, conn: Client) -> None:
        self.updates.conn = conn

    def _live(self) -> None:
        if self.disposed:
            raise internal(DISPOSED)

    # -- initialize ---------------------------------------------------------------------------

    @_guarded
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        """Always protocol version 1 (single-version), whatever the client proposes. Usage updates go only
        to a client that advertises session capabilities: the libraries that do all take ``usage_update``,
        while older ones (``@zed-industries/agent-client-protocol`` 0.4) reject every one."""
        self._live()
        self.updates.usage = client_capabilities is not None and client_capabilities.session is not None
        capabilities = AgentCapabilities(
            mcp_capabilities=McpCapabilities(http=True),
            prompt_capabilities=PromptCapabilities(image=await self._images(), audio=False, embedded_context=False),
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

    async def _images(self) -> bool:
        """Whether new sessions take prompt images: an attachment store, and a default route with image input."""
        from pydsh.images.keys import ATTACHMENTS
        from pydsh.images.prompt import vision_model

        if self.ctx.get(ATTACHMENTS) is None:
            return False
        route = {"provider": self.default.provider, "model": self.default.model} if self.default else None
        return (await vision_model(self.ctx, None, route))[0]

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
        spec = AgentSpec(
            cwd,
            provider=selection.provider if selection is not None else None,
            model=selection.model if selection is not None else None,
            setup=self._mounts(mcp_configs(mcp_servers or [], cwd), cwd),
        )
        try:
            agent = await self.host.create(spec)
        except HostError as exc:
            raise invalid(str(exc)) from None
        entry = await self._adopt(agent, selection and Selection(selection.provider, selection.model))
        return NewSessionResponse(session_id=entry.id, config_options=await self.options.options(entry.selection))

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
        problem = session_id_problem(session_id)
        if problem is not None:
            raise invalid(f"session id {problem}")
        if self.host.agent(session_id) is not None or self.host.sessions.get(session_id) is not None:
            raise invalid(f"session is already active: {session_id}")
        try:
            header = await self.host.stored_header(session_id)
        except HostError as exc:
            if exc.code != "not_found":
                raise
            raise invalid(f"session is not resumable: {session_id}") from None
        refusal = resume_refusal(header)
        if refusal is not None:
            raise invalid(
                f"session is not resumable: {session_id}" if refusal.code == "member_session" else str(refusal)
            )
        stored = header.get("cwd")
        if not isinstance(stored, str) or not same_directory(stored, cwd):
            raise invalid(f"session cwd does not match: {cwd}")
        try:
            agent = await self.host.resume(
                session_id, AgentSpec(setup=self._mounts(mcp_configs(mcp_servers or [], stored), stored))
            )
        except HostError as exc:
            if exc.code == "already_open":
                raise invalid(f"session is already active: {session_id}") from None
            raise
        logged = logged_route(agent.session.request_header())
        selection = Selection(*logged) if logged is not None else self.default and Selection(**vars(self.default))
        entry = await self._adopt(agent, selection)
        return ResumeSessionResponse(config_options=await self.options.options(entry.selection))

    def _mounts(self, servers: list[dict[str, Any]], cwd: str) -> Callable[[Context, Any], Awaitable[None]] | None:
        """The per-session setup mounting the client's MCP servers in the new agent's scope (``None``: none)."""
        if not servers:
            return None

        async def mount(agent_ctx: Context, agent: Any) -> None:
            from pydsh.tools.mcp import McpConfigError, McpUnavailableError, mount_servers

            try:
                await mount_servers(agent_ctx, servers, cwd=cwd)
            except McpConfigError as exc:
                raise invalid(str(exc)) from None
            except McpUnavailableError as exc:
                self._mcp_missing(exc)

        return mount

    def _mcp_missing(self, exc: McpUnavailableError) -> None:
        """The editor declared MCP servers but the extra is absent: warn once, run without their tools."""
        if not self.mcp_warned:
            self.mcp_warned = True
            log.warning("the editor's MCP servers are not mounted: %s", exc)

    async def _adopt(self, agent: Agent, selection: Selection | None) -> BridgeSession:
        """Own a freshly opened agent: route selection, delivery queue, durable log; undone on failure."""
        entry = BridgeSession(agent, selection, self.updates.queue_for(agent.session_id))
        try:
            install_model_selection(agent.live.ctx, entry.model_selection, owner=self.ctx)
            await self.host.sessions.flush(agent.session)
            if self.disposed:
                raise internal(DISPOSED)
        except BaseException:
            entry.queue.close()
            await agent.close()
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
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        stored: list[dict[str, Any]] = await persistence.list() if persistence is not None else []
        headers = [row["header"] for row in stored if isinstance(row.get("header"), dict)]
        live = self.host.sessions
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
            raise internal(f"session close failed: {detail(exc)}") from exc
        return CloseSessionResponse()

    def _teardown(self, entry: BridgeSession) -> asyncio.Task[None]:
        if entry.closing is None:
            entry.closing = asyncio.ensure_future(self._close(entry))
        return entry.closing

    async def _close(self, entry: BridgeSession) -> None:
        """Cancel, wait for idle, send what is queued, then close the agent (spec 11 §A.9)."""
        if entry.prompt is not None:
            entry.prompt.cancelled = True
        entry.agent.cancel()
        await entry.agent.live.when_idle()
        await entry.queue.drain()
        try:
            await entry.agent.close()
        finally:
            entry.queue.close()
            if self.sessions.get(entry.id) is entry:
                del self.sessions[entry.id]

    async def dispose(self) -> list[str]:
        """End of input: refuse further requests and close every owned session; the failures."""
        self.disposed = self.updates.closed = True
        entries = list(self.sessions.values())
        results = await asyncio.gather(*(self._teardown(e) for e in entries), return_exceptions=True)
        return [f"session {e.id}: {detail(r)}" for e, r in zip(entries, results, strict=True) if r is not None]

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
        blocks = admit_prompt(prompt)
        state = entry.prompt = PromptState()
        try:
            text = await self._stored(entry, blocks)
            if entry.selection is not None:
                entry.model_selection.current = entry.selection.route()
            receipt = await entry.agent.submit(text, message_id=str(uuid.uuid4()))
            await entry.agent.settle(also=entry.queue.drain)
            if state.cancelled:
                return PromptResponse(stop_reason="cancelled")
            if state.delivery_failure is not None:
                raise internal(f"assistant output delivery failed: {state.delivery_failure}")
            return PromptResponse(stop_reason=verdict(entry.agent.result(receipt.seq)))
        except asyncio.CancelledError:
            state.cancelled = True
            entry.agent.cancel()
            raise
        finally:
            if entry.prompt is state:
                entry.prompt = None

    async def _stored(self, entry: BridgeSession, prompt: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        """The prompt with its images stored and logged by reference, checked against the session's route."""
        if isinstance(prompt, str):
            return prompt
        from pydsh.images.prompt import ImagePromptError, admit_images

        route = {"provider": entry.selection.provider, "model": entry.selection.model} if entry.selection else None
        try:
            return await admit_images(self.ctx, entry.agent.live, prompt, route)
        except ImagePromptError as exc:
            raise invalid(str(exc)) from None

    def cancel_soon(self, session_id: str) -> None:
        """``cancel`` from outside the library (a ``$/cancel_request`` of a prompt in flight)."""
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.cancel(session_id)))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Cancel the prompt in flight, else the agent's autonomous work; unknown ids are ignored."""
        entry = self.sessions.get(session_id)
        if entry is None or self.disposed:
            return
        if entry.prompt is not None:
            entry.prompt.cancelled = True
        entry.agent.cancel()

    # -- config options -----------------------------------------------------------------------

    @_guarded
    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        """Select the model or reasoning effort of later prompts (serialised per session)."""
        self._live()
        entry = self._entry(session_id)
        async with entry.config_lock:
            choice = check_choice(config_id, value)
            if entry.selection is None:
                raise invalid("this session has no model selection")
            entry.selection = await self.options.choose(entry.selection, config_id, choice)
            return SetSessionConfigOptionResponse(config_options=await self.options.options(entry.selection))


def verdict(result: RunResult) -> StopReason:
    """The ACP stop reason of a settled prompt's run, from the turn that claimed the prompt on (the first
    to start after its receipt): an error turn among them fails the prompt, else the last one decides."""
    claimed: int | None = None
    reasons: list[Any] = []
    for event in result.events:
        if event["type"] == "turn/start" and claimed is None:
            claimed = event["data"]["turn"]
        elif event["type"] == "turn/end" and claimed is not None and event["data"]["turn"] >= claimed:
            reasons.append(event["data"]["reason"])
    for reason in reversed(reasons):
        if reason["kind"] == "error":
            error = reason.get("error") or {}
            raise internal(f"turn failed: {error.get('message', 'unknown error')}")
    return stop_reason(reasons[-1]["kind"] if reasons else None)
