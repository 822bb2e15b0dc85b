"""The web host over the application layer: the sessions the page opens, prompts and controls (spec 12 §4).

Stdlib and pydsh only (no web framework): the starlette routes in ``api.py`` call into one
:class:`WebHub`. It opens root sessions through the :class:`~pydsh.host.Host` (each once, prompts
acknowledged once on disk) and keeps three parts: ``views`` (what the page reads), ``waiting``
(approvals, questions, queued prompts) and ``streams`` (the kernel's events fanned out to the page).
Nothing here appends to a log except through the services that own those events.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import PRE_STEP
from pydsh.agent.keys import AGENT_PRESETS, AGENTS
from pydsh.apps.web import images as web_images
from pydsh.apps.web import references
from pydsh.apps.web.errors import ApiError, not_found
from pydsh.apps.web.streams import Streams
from pydsh.apps.web.views import SessionViews
from pydsh.apps.web.waiting import Waiting
from pydsh.host import Agent, AgentSpec, HostError
from pydsh.host.routes import RouteChoice, RouteSelections, check_route
from pydsh.policy.keys import APPROVAL, PERMISSIONS, USER_QUESTIONS
from pydsh.session.keys import SESSION_TITLE, SESSIONS

if TYPE_CHECKING:
    from pydsh.agent.registry import AgentRegistry
    from pydsh.contract.agent import Agent as LiveAgent
    from pydsh.host import Host
    from pydsh.host.agent import Mode
    from pydsh.host.run import Receipt
    from pydsh.kernel.fiber import Disposer
    from pydsh.session.log import SessionStore

log = logging.getLogger("pydsh.web")

PERMISSION_PRESETS = ("read-only", "workspace-write", "danger-full-access")
REFUSALS: dict[str, tuple[int, str]] = {
    "member_session": (409, "member_session"),
    "owned_elsewhere": (409, "session_owned_elsewhere"),
    "bad_workspace": (422, "not_a_directory"),
    "unknown_preset": (422, "unknown_agent_preset"),
}
"""How the host's refusals read on the web API: status and error code (``not_found`` is 404; anything else
409 ``session_unavailable``)."""


class WebHub:
    """Everything the HTTP layer asks of the host, on the kernel's loop."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.ctx = host.ctx
        self.views = SessionViews(self)
        self.waiting = Waiting(self)
        self.streams = Streams(self)
        self._listeners: list[Disposer] = []
        self._selections = RouteSelections(self.ctx)
        self.stopping = False

    @property
    def agents(self) -> AgentRegistry:
        return self.ctx.require(AGENTS)

    @property
    def store(self) -> SessionStore:
        return self.ctx.require(SESSIONS)

    def start(self) -> None:
        """Listen to the kernel's events and answer approvals and questions."""
        ctx = self.ctx
        self._listeners += self.streams.listen()
        self._listeners.append(
            ctx.on(PRE_STEP, references.listener(self), name=references.LISTENER, after=references.AFTER)
        )
        approval = ctx.get(APPROVAL)
        if approval is not None:
            self._listeners.append(approval.add_answerer(ctx, self.waiting.answer_approval))
        questions = ctx.get(USER_QUESTIONS)
        if questions is not None:
            self._listeners.append(questions.add_answerer(ctx, self.waiting.answer_questions))

    async def stop(self) -> None:
        """Cancel running turns, resolve what waits as ``cancelled``, close the sessions and every stream (C5)."""
        self.stopping = True
        self.waiting.cancel_all()
        for agent in self.host.agents:
            if agent.status == "running":
                agent.cancel(keep_queue=True)
        for error in await self.host.close_agents():
            log.warning("closing a session failed: %s", error)
        for remove in self._listeners:
            remove()
        self._listeners.clear()
        self.streams.close()

    # -- opening sessions ---------------------------------------------------------------------

    async def create_session(
        self,
        cwd: str,
        agent_preset: str | None,
        permission_preset: str | None,
        model: dict[str, Any] | None,
    ) -> Agent:
        """A new root session in ``cwd`` with the chosen presets and route."""
        self._accepting()
        spec = AgentSpec(cwd, preset=agent_preset)
        if model is not None:
            await self.check_route(model)
            spec = AgentSpec(cwd, model["provider"], model["model"], model.get("effort"), preset=agent_preset)
        if agent_preset is not None and agent_preset not in self._roster_ids():
            raise ApiError(422, "unknown_agent_preset", f'Unknown agent preset "{agent_preset}".')
        if permission_preset is not None and permission_preset not in PERMISSION_PRESETS:
            raise ApiError(422, "unknown_preset", f'Unknown permission preset "{permission_preset}".')
        try:
            agent = await self.host.create(spec)
        except HostError as exc:
            raise refusal(exc) from None
        if permission_preset is not None:
            self.set_permission(agent.live, permission_preset)
        self.streams.mark_index(agent.session_id)
        return agent

    def _roster_ids(self) -> set[str]:
        roster = self.ctx.get(AGENT_PRESETS)
        if roster is None or not roster.configured:
            return set()
        return {str(p["id"]) for p in roster.list()}

    def _accepting(self) -> None:
        if self.stopping:
            raise ApiError(409, "shutting_down", "The server is shutting down.")

    async def open(self, session_id: str) -> Agent:
        """The root session's agent, resuming a stored one once however many ask at once."""
        agent = self.host.agent(session_id)
        if agent is not None and not agent.alive:
            await agent.close()
        self._accepting()
        try:
            return await self.host.open_agent(session_id)
        except HostError as exc:
            raise refusal(exc, session_id) from None

    async def live_agent(self, session_id: str) -> LiveAgent:
        """The session's live agent: a live member's own, else the root session opened (F31, F26, F5)."""
        live = self.agents.get(session_id)
        if live is not None:
            return live
        return (await self.open(session_id)).live

    # -- prompts, queue, control ----------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        text: str,
        mode: str,
        client_message_id: str | None,
        zone: str | None,
        *,
        refs_asked: list[str] | None = None,
        images: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Queue a prompt as the next turn or steer it into the next step (F27); answered once it is on disk.

        ``refs_asked`` (session ids) ride in the prompt's source; the agent reads their snapshots when a
        step claims it (``references.py``). ``images`` (inline blocks) are stored and logged by reference."""
        session = await self.views.read(session_id)
        if session.header.get("origin") == "subagent":
            raise ApiError(409, "member_session", "Member sessions take input from their agents, not from the user.")
        refs = await references.check_references(self, session_id, refs_asked) if refs_asked else []
        agent = await self.open(session_id)
        source: dict[str, Any] = {"kind": "user", "rpcId": client_message_id or str(uuid.uuid4())}
        if zone is not None:
            source["clientTimeZone"] = zone
        if refs:
            source[references.FIELD] = refs
        blocks = web_images.blocks(text, images or [])
        prompt = await web_images.admitted(self.ctx, agent.live, blocks, self._selections.current(agent.live))
        try:
            receipt = await self._submit(agent, prompt, mode, source)
        except ValueError as exc:
            raise ApiError(409, "not_accepted", str(exc)) from None
        return {"messageId": receipt.message_id, "queued": receipt.queued, "acceptedAtSeq": receipt.accepted_at_seq}

    async def _submit(self, agent: Agent, prompt: Any, mode: str, source: dict[str, Any]) -> Receipt:
        """Queue or steer ``prompt``; an agent let go as idle since it was opened is resumed for it."""
        queue_mode: Mode = "steer" if mode == "steer" else "queue"
        try:
            return await agent.submit(prompt, mode=queue_mode, source=source)
        except HostError as exc:
            if exc.code != "closed":
                raise
        return await (await self.open(agent.session_id)).submit(prompt, mode=queue_mode, source=source)

    async def unqueue(self, session_id: str, message_id: str) -> None:
        """Cancel a queued prompt in the inbox so it never runs (F27); an offline session is opened for it, since
        its log keeps the prompt for the next run."""
        agent = self.agents.get(session_id)
        if agent is None:
            session = await self.views.read(session_id)
            if session.header.get("origin") != "subagent":
                agent = await self.live_agent(session_id)
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
        session = await self.views.read(session_id)
        if session.header.get("origin") != "subagent":
            raise ApiError(409, "not_a_member", "Interrupt is for member sessions; use cancel for your own.")
        self.cancel(session_id)

    def set_permission(self, agent: LiveAgent, preset: str) -> str:
        permissions = self.ctx.get(PERMISSIONS)
        if permissions is None:
            raise ApiError(404, "feature_unavailable", "Permission presets are not composed.")
        try:
            permissions.set_permission_preset(agent, preset)
        except ValueError as exc:
            raise ApiError(422, "unknown_preset", str(exc)) from None
        return preset

    async def check_route(self, model: dict[str, Any]) -> None:
        """422 unless the provider has an adapter and the model (and effort) are in its catalog."""
        try:
            await check_route(self.ctx, _choice(model))
        except HostError as exc:
            raise ApiError(422, exc.code, str(exc)) from None

    async def set_model(self, session_id: str, model: dict[str, Any]) -> dict[str, Any]:
        """Route the session's next requests to ``model`` and echo it as ``model/selection`` (F26)."""
        await self.check_route(model)
        agent = await self.live_agent(session_id)
        await self._selections.select(agent, _choice(model))
        return model

    async def set_title(self, session_id: str, title: str) -> str:
        """Rename: a ``session/title`` with ``source: {kind: "user"}`` (F5); empty is 422."""
        titles = self.ctx.get(SESSION_TITLE)
        if titles is None:
            raise ApiError(404, "feature_unavailable", "Session titles are not composed.")
        if not title.strip():
            raise ApiError(422, "empty_title", "A session title must not be empty.")
        agent = await self.live_agent(session_id)
        try:
            event = titles.rename(agent.session, title)
        except ValueError as exc:
            raise ApiError(422, "empty_title", str(exc)) from None
        return str(event["data"]["title"])


def _choice(model: dict[str, Any]) -> RouteChoice:
    return RouteChoice(model["provider"], model["model"], model.get("effort"))


def refusal(exc: HostError, session_id: str | None = None) -> ApiError:
    """The web API's one-line error for a session the host refused to create or open."""
    status, code = REFUSALS.get(exc.code, (409, "session_unavailable"))
    if exc.code == "not_found":
        return not_found(f'Session "{session_id}"')
    if exc.code == "owned_elsewhere":
        return ApiError(status, code, f'Session "{session_id}" is open in another pydsh process.')
    if exc.code == "member_session":
        return ApiError(status, code, "Member sessions are resumed by their agents, not from the page.")
    if exc.code == "bad_workspace" and session_id is not None:
        return ApiError(409, "session_unavailable", str(exc))
    if code == "session_unavailable":
        return ApiError(status, code, f"Session {session_id} cannot be opened: {exc}")
    return ApiError(status, code, str(exc))
