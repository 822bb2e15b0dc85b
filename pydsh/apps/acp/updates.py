"""What the editor is told about a session: updates derived from committed log events, sent in log order
through one delivery queue per session, and tool approvals asked of the editor (spec 11 §A.5, §A.7)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp.schema import ConfigOptionUpdate, PermissionOption, ToolCallUpdate, UsageUpdate

from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.agent.loop import error_chain
from pydsh.agent.model_selection import ModelSelection
from pydsh.apps.acp.wire import assistant_updates, tool_call_update, tool_result_update
from pydsh.compaction.keys import TOKEN_METER
from pydsh.llm.hooks import ADAPTERS_UPDATED, AdaptersUpdated
from pydsh.llm.types import LlmError
from pydsh.policy.keys import APPROVAL
from pydsh.session.hooks import SESSION_EVENT

if TYPE_CHECKING:
    from acp import Client

    from pydsh.apps.acp.options import ModelOptions, Selection
    from pydsh.host import Agent
    from pydsh.kernel.context import Context
    from pydsh.policy.approval import ApprovalRequest
    from pydsh.session.events import Event
    from pydsh.session.log import Session

log = logging.getLogger("pydsh.acp")

PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
]

Update = Any
Producer = Callable[[], Awaitable[Update | None]]


@dataclass
class PromptState:
    """What one ``session/prompt`` learns while it settles: cancellation and a failed assistant delivery."""

    cancelled: bool = False
    delivery_failure: str | None = None


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

    agent: Agent
    selection: Selection | None
    queue: DeliveryQueue
    model_selection: ModelSelection = field(default_factory=ModelSelection)
    prompt: PromptState | None = None
    config_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closing: asyncio.Task[None] | None = None

    @property
    def id(self) -> str:
        return self.agent.session_id


def detail(exc: BaseException) -> str:
    """The one-line detail of a failure the editor is told about."""
    return exc.message if isinstance(exc, LlmError) else error_chain(exc)


class Updates:
    """Listens to the process's events and queues each owned session's updates; answers its approvals."""

    def __init__(self, ctx: Context, sessions: dict[str, BridgeSession], options: ModelOptions) -> None:
        self.ctx = ctx
        self.sessions = sessions
        self.options = options
        self.conn: Client | None = None
        self.closed = False
        self.usage = False
        """Whether the client takes ``usage_update``s (set from what it advertised in ``initialize``)."""
        ctx.on(SESSION_EVENT, self._on_event)
        ctx.on(ADAPTERS_UPDATED, self._on_adapters)
        approval = ctx.get(APPROVAL)
        if approval is not None:
            approval.add_answerer(ctx, self._answer_approval)

    def client(self) -> Client:
        if self.conn is None:
            raise RuntimeError("the ACP client connection is not established")
        return self.conn

    def queue_for(self, session_id: str) -> DeliveryQueue:
        """A new delivery queue for ``session_id``; a failed assistant update fails its settling prompt."""

        async def send(update: Update) -> None:
            await self.client().session_update(session_id, update)

        def failed(item: Delivery, exc: Exception) -> None:
            owner = self.sessions.get(session_id)
            self.delivery_failed(owner.prompt if owner is not None and item.assistant else None, exc)

        return DeliveryQueue(send, failed)

    def delivery_failed(self, prompt: PromptState | None, exc: Exception) -> None:
        """A failed update: assistant output fails the settling prompt; anything else is logged and skipped."""
        if prompt is not None and prompt.delivery_failure is None:
            prompt.delivery_failure = detail(exc)
        if self.closed:
            log.debug("dropped an ACP update after the connection closed: %s", exc)
            return
        log.warning("delivering an ACP session update failed: %s", detail(exc))

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
            cwd = self.ctx.require(WORKING_DIRECTORY).logged(session)
            entry.queue.put(tool_call_update(event, cwd))
        elif etype == "tool/result" and event.get("surfaceOp") == "append":
            entry.queue.put(tool_result_update(event))

    def _assistant_output(self, entry: BridgeSession, session: Session, event: Event) -> None:
        """Chunks of an assistant message, then the usage update; a failure is kept for the prompt."""
        try:
            for update in assistant_updates(event):
                entry.queue.put(update, assistant=True)
        except Exception as exc:
            self.delivery_failed(entry.prompt, exc)
            return
        if not self.usage:
            return
        context = session.request_context() or {}
        window = context.get("contextWindow")
        meter = self.ctx.get(TOKEN_METER)
        if event["data"].get("usage") is not None and window and meter is not None:
            used = meter.measure(session).total_tokens
            entry.queue.put(UsageUpdate(session_update="usage_update", used=used, size=int(window)))

    def _on_adapters(self, payload: AdaptersUpdated) -> None:
        for entry in self.sessions.values():

            async def options(entry: BridgeSession = entry) -> Update:
                return ConfigOptionUpdate(
                    session_update="config_option_update", config_options=await self.options.options(entry.selection)
                )

            entry.queue.put_later(options)

    async def _answer_approval(self, request: ApprovalRequest) -> str | None:
        """Ask the editor about an owned agent's tool call, after it has seen the ``tool_call`` update."""
        entry = self.sessions.get(request.agent.id)
        if entry is None or entry.agent.live is not request.agent or request.call_id is None or self.closed:
            return None
        await entry.queue.drain()
        meta = {"reason": request.reason} if request.reason else {}
        response = await self.client().request_permission(
            session_id=entry.id,
            tool_call=ToolCallUpdate(tool_call_id=request.call_id),
            options=PERMISSION_OPTIONS,
            **meta,
        )
        outcome = response.outcome
        if outcome.outcome == "cancelled":
            return "cancelled"
        return "allowed-once" if getattr(outcome, "option_id", None) == "allow-once" else "rejected"
