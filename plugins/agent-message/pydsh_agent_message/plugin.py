"""The ``agent-message`` plugin: ``list_peer_agents``, ``send_agent_message`` and ``check_delivery`` (spec 09).

Peers are the non-archived, non-subagent sessions this process can see through ``session_query``;
delivery goes into the target agent's inbox (resuming an offline target through ``agents.resume``);
receipts are folded from the target's ``agent/inbox/spliced`` events. Our addition: ``reply_to`` and
the ``answered`` state, derived from the sender's own log.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import time
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from pydsh.plugin import (
    AGENT_DEFAULT_MODEL,
    AGENT_DISPOSED,
    AGENT_PRESETS,
    AGENTS,
    PROMPT_ASSEMBLE,
    SESSION_QUERY,
    SESSION_TITLE,
    TOOLS,
    Agent,
    AgentHandle,
    AgentOptions,
    AgentRef,
    AgentRegistry,
    Context,
    Next,
    PromptAssemble,
    PromptAssembly,
    ServiceKey,
    SessionError,
    SessionFormatUnsupportedError,
    SessionLogError,
    SessionPersistenceCorruptionError,
    SessionPersistenceIOError,
    SessionPersistenceNotFoundError,
    ToolDefinition,
    ToolError,
    ToolExec,
    ToolOutcome,
    inherited_event_count,
    preset_setup,
    user_message,
)

log = logging.getLogger("pydsh_agent_message")
TAG_OPEN = "<dsh-agent-message>"
TAG_CLOSE = "</dsh-agent-message>"
TOOL_NAMES = frozenset({"list_peer_agents", "send_agent_message", "check_delivery"})
RESERVED_TAG = re.compile(r"(?:<|&lt;?|&#0*60;?|&#x0*3c;?|\\u003c|\\x3c)[\W_]*dsh[\W_]*agent[\W_]*message")
"""An opening or closing tag a model would read as the relay header's: any case, spacing, separator or attributes."""
ANGLE_LOOKALIKES = str.maketrans(dict.fromkeys("\u2039\u2329\u3008\u27e8\u276c\u276e\u02c2\u1438", "<"))
IGNORED_CATEGORIES = frozenset({"Cf", "Mn", "Me"})
"""Invisible format characters and combining marks: a model reads the text as if they were not there."""
SOURCE_KIND = "dsh-agent-message"
MODES = ("followup", "inject", "steer")
RECEIPT_MEANING = (
    "claimed only means a target turn took the message from its inbox; it does not mean the target read, "
    "answered, or completed it."
)
STATUS_RANK = {"running": 0, "idle": 1, "offline": 2}

LIST_DESCRIPTION = (
    "List every DeepSeek Harness session you can message: not archived and not a subagent. Each row has id, title, "
    'cwd, status (running, idle, or offline = not loaded in this process), kind (always "peer"), and self (true for '
    "your own session). Running sessions come first, then idle, then offline, each sorted by title. Ordinary forks are "
    "independent sessions and are listed. Use a row's id with send_agent_message; an offline target is resumed "
    "automatically. This is different from list_agents, which lists the subagents you started."
)
SEND_DESCRIPTION = (
    "Deliver a message to another session (by session id) when the current request, or an orchestration duty the "
    "user already gave you, requires cross-session communication. Mentioning a session only identifies it; it is not "
    "a request to send. When you receive a relay message, reply to its senderSessionId with this tool only if the "
    'body explicitly asks for content back; never send bare acknowledgements such as "received". The default mode '
    "followup queues an independent new turn; an offline target (not loaded in this process) is resumed first. Use "
    "steer only when the target is running and the request clearly asks to intervene immediately; use inject only "
    "when the target is running and the request clearly asks to add context without interrupting its current work; "
    "when unsure, omit mode. At most 10 messages per 60 seconds are delivered between any two sessions, both "
    "directions combined. Archived sessions and subagents are always rejected. This is different from send_message, "
    "which continues a conversation with your own subagents."
)
CHECK_DESCRIPTION = (
    "Check, on demand, the delivery state of messages you sent to a session. States: pending = still queued in the "
    "target's inbox; claimed = a turn of the target took it from the inbox; discarded = removed without being run; "
    "unknown = not found. claimed does not mean read, answered, or done. With messageId the state is recovered from "
    "the target's inbox log, even after a restart; without it, every message this process sent to that session is "
    "listed."
)
LIST_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
SEND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Target session id, from list_peer_agents or a copied session id."},
        "content": {
            "type": "string",
            "description": (
                'Only the message text the user wants delivered. Do not add "received", "please confirm", or '
                "other transport acknowledgements."
            ),
        },
        "mode": {
            "type": "string",
            "enum": list(MODES),
            "description": (
                "Omit when unsure (followup). steer = intervene in a running target now; inject = add context to a "
                "running target without interrupting it."
            ),
        },
        "reply_to": {
            "type": "string",
            "description": (
                "Optional: the messageId of a relay message you received from this target that this message answers; "
                "check_delivery on that message then reports state answered with replyMessageId."
            ),
        },
    },
    "required": ["to", "content"],
}
CHECK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "to": {"type": "string", "description": "Target session id."},
        "messageId": {"type": "string", "description": "Optional: one message id returned by send_agent_message."},
    },
    "required": ["to"],
}


class Config(BaseModel):
    """Limits of 09 §6; ``rateLimit: null`` disables the pair rate limit (tests and trusted hosts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rateLimit: int | None = 10
    rateWindowMs: int = 60_000
    sentLimit: int = 1000


@dataclass(frozen=True)
class Sent:
    """One bookkept message: its target, send time (epoch ms) and mode."""

    to: str
    at: int
    mode: str


def compact(value: Any) -> str:
    """The compact JSON rendering of list and receipt results (09 §2)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def fail(code: str, message: str) -> ToolError:
    """A rejection of 09 §3: ``Error: <message>`` with ``error.code``."""
    return ToolError(message, code, name="AgentMessageError")


def reserved_tag(content: str) -> bool:
    """Whether ``content`` holds something a model would read as the relay header tag (rule 5 of 09 §3).

    The check runs on the text as a model sees it: compatibility forms folded (full-width brackets and
    letters), invisible characters and combining marks dropped, case ignored, bracket look-alikes and
    escaped brackets taken as ``<``.
    """
    folded = unicodedata.normalize("NFKD", content)
    visible = "".join(ch for ch in folded if unicodedata.category(ch) not in IGNORED_CATEGORIES)
    return RESERVED_TAG.search(visible.translate(ANGLE_LOOKALIKES).casefold()) is not None


def stored_log_problem(exc: BaseException) -> str | None:
    """What is wrong with a stored log, in words without file paths; ``None`` when ``exc`` is another failure."""
    if isinstance(exc, (SessionPersistenceCorruptionError, SessionLogError)):
        return "its stored log is damaged"
    if isinstance(exc, SessionFormatUnsupportedError):
        return "its stored log uses a format this version cannot read"
    if isinstance(exc, (SessionPersistenceIOError, OSError)):
        return "its stored log cannot be read from storage"
    return None


def unreadable(to: str, exc: BaseException) -> ToolError:
    """``AGENT_MESSAGE_UNREADABLE_SESSION`` for a target whose log cannot be read; the details go to the log."""
    log.warning("agent-message: session %s cannot be read: %s", to, exc)
    problem = stored_log_problem(exc) or "its stored log cannot be read"
    return fail("AGENT_MESSAGE_UNREADABLE_SESSION", f"session {to} cannot be read: {problem}")


class WorkspaceRegistry(Protocol):
    """An optional service of the host application: the sessions its user archived (never messaged)."""

    def archived_session_ids(self) -> Iterable[str] | Awaitable[Iterable[str]]: ...


WORKSPACE_REGISTRY: ServiceKey[WorkspaceRegistry] = ServiceKey("workspace_registry")


def is_subagent(agent: Any) -> bool:
    """Whether ``agent`` runs a subagent session (header ``origin: "subagent"``), which every tool refuses."""
    return agent is not None and agent.session.header.get("origin") == "subagent"


async def hide_from_subagents(payload: PromptAssemble, nxt: Next[PromptAssembly]) -> PromptAssembly:
    """Leave the three tools out of a subagent's prompt: they refuse subagent callers, so offering them only fails."""
    result = await nxt()
    if is_subagent(payload["agent"]):
        result.tools = [tool for tool in result.tools if tool["name"] not in TOOL_NAMES]
    return result


def relay_text(sender_id: str, content: str) -> str:
    """The model-visible relay body: the Host-generated header line, a blank line, the content unchanged."""
    return f"{TAG_OPEN}{compact({'senderSessionId': sender_id})}{TAG_CLOSE}\n\n{content}"


def fold_inbox(events: list[dict[str, Any]]) -> tuple[set[str], set[str], set[str]]:
    """``(pending, claimed, discarded)`` ids from the own-suffix ``agent/inbox/spliced`` events (09 §5)."""
    lists: dict[str, list[str]] = {"next-turn": [], "next-step": []}
    claimed: set[str] = set()
    discarded: set[str] = set()
    for event in events[inherited_event_count(events) :]:
        if event["type"] != "agent/inbox/spliced":
            continue
        data = event["data"]
        items = lists[data["target"]]
        start = data["start"]
        end = start + data.get("removedCount", 0)
        removed = items[start:end]
        items[start:end] = [m["id"] for m in data["inserted"]]
        (discarded if data.get("outcome") == "canceled" else claimed).update(removed)
    return set(lists["next-turn"]) | set(lists["next-step"]), claimed, discarded


def state_of(message_id: str, pending: set[str], claimed: set[str], discarded: set[str]) -> str:
    """State precedence: pending, then discarded, then claimed, else unknown."""
    if message_id in pending:
        return "pending"
    if message_id in discarded:
        return "discarded"
    return "claimed" if message_id in claimed else "unknown"


def relays_in(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Relay messages admitted to a session's inbox, in admission order (own suffix only)."""
    out: list[dict[str, Any]] = []
    for event in events[inherited_event_count(events) :]:
        if event["type"] == "agent/inbox/spliced":
            out.extend(m for m in event["data"]["inserted"] if (m.get("source") or {}).get("kind") == SOURCE_KIND)
    return out


class AgentMessage:
    """The plugin's state: the sent map, pair rate windows, pending resumes and retained handles (09 §6)."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.agents: AgentRegistry = ctx.require(AGENTS)
        self.query: Any = ctx.require(SESSION_QUERY)
        self.sent: OrderedDict[str, Sent] = OrderedDict()
        self.windows: dict[frozenset[str], deque[tuple[float, object]]] = {}
        self.resuming: dict[str, asyncio.Future[AgentHandle]] = {}
        self.retained: dict[str, AgentHandle] = {}
        self.queues: dict[str, asyncio.Future[None]] = {}
        """Per target, the newest send in flight: each send delivers after the one before it (call order)."""

    # -- shared checks ----------------------------------------------------------------------

    def _caller(self, exec: ToolExec) -> Agent | None:
        agent = exec.agent
        if is_subagent(agent):
            raise fail("AGENT_MESSAGE_SUBAGENT_CALLER", "subagents cannot use cross-session messaging tools")
        return agent

    async def _archived(self) -> set[str]:
        registry = self.ctx.get(WORKSPACE_REGISTRY)
        if registry is None:
            return set()
        ids = registry.archived_session_ids()
        if inspect.isawaitable(ids):
            ids = await ids
        return set(ids)

    def _status(self, session_id: str) -> str:
        agent = self.agents.get(session_id)
        return agent.status if agent is not None else "offline"

    async def _titles(self, ids: list[str]) -> dict[str, str]:
        titles: dict[str, str] = {}
        try:
            snapshots = await self.query.read_title_snapshots(ids)
        except Exception:
            return titles
        for snap in snapshots:
            title = snap.get("title") if snap.get("ok") else None
            titles[snap["id"]] = str(title.get("title") or "") if isinstance(title, dict) else ""
        return titles

    # -- list_peer_agents -------------------------------------------------------------------

    async def list_peer_agents(self, args: Any, exec: ToolExec) -> ToolOutcome:
        caller = self._caller(exec)
        archived = await self._archived()
        headers = [
            row["header"]
            for row in await self.query.list_sessions()
            if row["header"]["id"] not in archived and row["header"].get("origin") != "subagent"
        ]
        ids = [str(h["id"]) for h in headers]
        titles = await self._titles(ids)
        rows: list[dict[str, Any]] = [
            {
                "id": sid,
                "title": titles.get(sid, ""),
                "cwd": str(h.get("cwd") or ""),
                "status": self._status(sid),
                "kind": "peer",
                "self": caller is not None and sid == caller.id,
            }
            for sid, h in zip(ids, headers, strict=True)
        ]
        rows.sort(key=lambda r: (STATUS_RANK[r["status"]], r["title"] == "", r["title"], r["id"]))
        for row in rows:
            if not row["title"]:
                row["title"] = f"(untitled · {str(row['id']).removeprefix('session-')[:8]})"
        return ToolOutcome([{"type": "text", "text": compact(rows)}], False, None, rows)

    # -- send_agent_message -----------------------------------------------------------------

    async def send_agent_message(self, args: Any, exec: ToolExec) -> ToolOutcome:
        if exec.agent is None:
            raise fail("AGENT_MESSAGE_NO_CALLER", "send_agent_message requires a calling agent")
        caller = self._caller(exec)
        assert caller is not None
        to = str(args.get("to") or "")
        content = str(args.get("content") or "")
        mode = str(args.get("mode") or "followup")
        reply_to = args.get("reply_to")
        if mode not in MODES:
            raise fail("AGENT_MESSAGE_MODE", f"mode must be one of followup, inject, steer (got {mode!r})")
        if not to or to == caller.id:
            raise fail("AGENT_MESSAGE_SELF", "cannot send a message to your own session")
        if not content.strip():
            raise fail("AGENT_MESSAGE_EMPTY", "content must be non-empty")
        if reserved_tag(content):
            raise fail("AGENT_MESSAGE_RESERVED_TAG", "content must not contain the reserved dsh-agent-message tag")
        if reply_to is not None:
            self._check_reply(caller, to, str(reply_to))
        if to in await self._archived():
            raise fail("AGENT_MESSAGE_ARCHIVED", "target session is archived; unarchive it first")
        earlier, mine = self.queues.get(to), asyncio.get_running_loop().create_future()
        self.queues[to] = mine
        try:
            await self._check_target(to, mode)
            slot = self._reserve(caller.id, to)
            try:
                target = await self._live_target(to)
                message = await self._relay(caller, to, content, None if reply_to is None else str(reply_to))
                if earlier is not None:
                    await earlier
                getattr(target, mode)(message)
            except BaseException:
                self._release(caller.id, to, slot)
                raise
        finally:
            mine.set_result(None)
            if self.queues.get(to) is mine:
                del self.queues[to]
        message_id = str(message["id"])
        self._bookkeep(message_id, Sent(to, int(time.time() * 1000), mode))
        text = (
            f"Delivered to session {to} as message {message_id} (mode {mode}). Accepted only: this does not mean "
            "the target read, answered, or completed it."
        )
        value = {
            "ok": True,
            "to": to,
            "mode": mode,
            "messageId": message_id,
            "state": "accepted",
            "targetRuntimeStatus": target.status,
            "text": text,
        }
        return ToolOutcome([{"type": "text", "text": text}], False, None, value)

    def _check_reply(self, caller: Agent, to: str, reply_to: str) -> None:
        """``reply_to`` must name a relay this session received from ``to`` (our addition)."""
        for message in relays_in(list(caller.session.events)):
            if message["id"] == reply_to and message["source"].get("senderSessionId") == to:
                return
        raise fail(
            "AGENT_MESSAGE_REPLY_UNKNOWN", f"reply_to {reply_to} is not a message this session received from {to}"
        )

    async def _check_target(self, to: str, mode: str) -> None:
        """Rules 7–11 of 09 §3: the target's kind, existence and runtime status."""
        live = self.agents.get(to)
        if live is not None:
            if live.session.header.get("origin") == "subagent":
                raise self._subagent_target()
            if mode != "followup" and live.status != "running":
                raise fail(
                    "AGENT_MESSAGE_NOT_RUNNING", f"{mode} is only for running sessions; target status: {live.status}"
                )
            return
        try:
            header = (await self.query.read_session(to))["session"]
        except SessionPersistenceNotFoundError:
            raise fail("AGENT_MESSAGE_UNKNOWN_SESSION", f"session not found: {to}") from None
        except (SessionError, OSError) as exc:
            raise unreadable(to, exc) from None
        if header.get("origin") == "subagent":
            raise self._subagent_target()
        if mode != "followup":
            raise fail(
                "AGENT_MESSAGE_NOT_RUNNING",
                f"target is offline (not loaded in this process); {mode} is only for running sessions",
            )

    @staticmethod
    def _subagent_target() -> ToolError:
        return fail(
            "AGENT_MESSAGE_SUBAGENT_TARGET",
            "target is a subagent; cross-session messages go only to independent sessions",
        )

    def _reserve(self, a: str, b: str) -> object:
        """Take a rate slot for the unordered pair, or reject the send (rule 12)."""
        slot = object()
        limit = self.config.rateLimit
        if limit is None:
            return slot
        now = time.monotonic()
        window = self.windows.setdefault(frozenset((a, b)), deque())
        horizon = now - self.config.rateWindowMs / 1000
        while window and window[0][0] <= horizon:
            window.popleft()
        if len(window) >= limit:
            raise fail(
                "AGENT_MESSAGE_RATE_LIMITED",
                "at most 10 messages per 60 seconds between the same two sessions; try again later",
            )
        window.append((now, slot))
        return slot

    def _release(self, a: str, b: str, slot: object) -> None:
        window = self.windows.get(frozenset((a, b)))
        if window is not None:
            for entry in list(window):
                if entry[1] is slot:
                    window.remove(entry)

    def _bookkeep(self, message_id: str, sent: Sent) -> None:
        self.sent[message_id] = sent
        while len(self.sent) > self.config.sentLimit:
            self.sent.popitem(last=False)

    async def _relay(self, caller: Agent, to: str, content: str, reply_to: str | None) -> dict[str, Any]:
        """The relay message of 09 §4.1 (``replyTo`` in the source is our addition)."""
        title = (await self._titles([caller.id])).get(caller.id) or caller.id
        source: dict[str, Any] = {
            "kind": SOURCE_KIND,
            "form": "relay",
            "protocolVersion": 1,
            "senderSessionId": caller.id,
            "targetSessionId": to,
            "senderTitle": title,
        }
        if reply_to is not None:
            source["replyTo"] = reply_to
        return user_message(relay_text(caller.id, content), source)

    # -- offline targets --------------------------------------------------------------------

    async def _live_target(self, to: str) -> Agent:
        """The live agent of ``to``, resuming it once however many sends wait for it (09 §4.2)."""
        agent = self.agents.get(to)
        if agent is not None:
            return agent
        pending = self.resuming.get(to)
        if pending is None:
            pending = asyncio.ensure_future(self._resume(to))
            self.resuming[to] = pending
            pending.add_done_callback(lambda _done: self.resuming.pop(to, None))
        try:
            handle = await asyncio.shield(pending)
        except Exception as exc:
            agent = self.agents.get(to)
            if agent is not None:
                return agent
            reason = stored_log_problem(exc)
            if reason is not None:
                log.warning("agent-message: could not resume session %s: %s", to, exc)
            raise fail("AGENT_MESSAGE_RESUME_FAILED", f"could not resume session {to}: {reason or exc}") from exc
        return handle.agent

    async def _resume(self, to: str) -> AgentHandle:
        selection = self.ctx.get(AGENT_DEFAULT_MODEL)
        route = selection.current_selection() if selection is not None else {"provider": "", "model": ""}
        options = AgentOptions(provider=route["provider"] or None, model=route["model"] or None)
        handle = await self.agents.resume(to, agent_options=options, setup=preset_setup(self.ctx))
        self.retained[to] = handle
        return handle

    def forget(self, payload: AgentRef) -> None:
        """Drop the retained handle of a disposed agent, so the next send resumes it again."""
        agent = payload["agent"]
        handle = self.retained.get(agent.id)
        if handle is not None and handle.agent is agent:
            del self.retained[agent.id]

    async def dispose(self) -> None:
        """Release every retained handle (plugin unload)."""
        handles, self.retained = list(self.retained.values()), {}
        await asyncio.gather(*(h.dispose() for h in handles), return_exceptions=True)

    # -- check_delivery ---------------------------------------------------------------------

    async def check_delivery(self, args: Any, exec: ToolExec) -> ToolOutcome:
        caller = self._caller(exec)
        to = str(args.get("to") or "")
        message_id = args.get("messageId")
        status = self._status(to)
        if message_id is not None:
            message_id = str(message_id)
            sent = self.sent.get(message_id)
            wanted = [] if sent is not None and sent.to != to else [message_id]
            entries = [] if wanted else [{"messageId": message_id, "state": "unknown", "targetRuntimeStatus": status}]
        else:
            wanted = [mid for mid, s in self.sent.items() if s.to == to]
            entries = []
        if wanted:
            entries = await self._entries(caller, to, wanted, status)
        result = {"to": to, "receiptMeaning": RECEIPT_MEANING, "entries": entries}
        return ToolOutcome([{"type": "text", "text": compact(result)}], False, None, result)

    async def _entries(self, caller: Agent | None, to: str, ids: list[str], status: str) -> list[dict[str, Any]]:
        """One entry per id, from one read of the target's log (never resumed) and the caller's replies."""
        try:
            events = (await self.query.read_session(to))["events"]
        except SessionPersistenceNotFoundError:
            events = []
        except (SessionError, OSError) as exc:
            raise unreadable(to, exc) from None
        pending, claimed, discarded = fold_inbox(events)
        replies = self._replies(caller, to)
        entries = []
        for mid in ids:
            entry: dict[str, Any] = {"messageId": mid}
            sent = self.sent.get(mid)
            if sent is not None:
                entry["sentAt"] = sent.at
                entry["mode"] = sent.mode
            reply = replies.get(mid)
            entry["state"] = "answered" if reply is not None else state_of(mid, pending, claimed, discarded)
            if reply is not None:
                entry["replyMessageId"] = reply
            entry["targetRuntimeStatus"] = status
            entries.append(entry)
        return entries

    @staticmethod
    def _replies(caller: Agent | None, to: str) -> dict[str, str]:
        """``original id -> first reply id`` for relays ``to`` sent the caller with ``replyTo`` (our addition)."""
        replies: dict[str, str] = {}
        if caller is None:
            return replies
        for message in relays_in(list(caller.session.events)):
            source = message["source"]
            if source.get("senderSessionId") == to and "replyTo" in source:
                replies.setdefault(str(source["replyTo"]), str(message["id"]))
        return replies


name = "agent-message"
hot_load = True
"""It may load into a running process (pydsh's profile-watch): its tools and listeners apply from the next step."""
inject = (AGENTS, TOOLS, SESSION_QUERY)
optional = (WORKSPACE_REGISTRY, SESSION_TITLE, AGENT_PRESETS, AGENT_DEFAULT_MODEL)


def apply(ctx: Context, config: Config) -> None:
    plugin = AgentMessage(ctx, config)
    tools = ctx.require(TOOLS)
    tools.register(ctx, ToolDefinition("list_peer_agents", LIST_DESCRIPTION, LIST_PARAMETERS, plugin.list_peer_agents))
    tools.register(
        ctx, ToolDefinition("send_agent_message", SEND_DESCRIPTION, SEND_PARAMETERS, plugin.send_agent_message)
    )
    tools.register(
        ctx,
        ToolDefinition("check_delivery", CHECK_DESCRIPTION, CHECK_PARAMETERS, plugin.check_delivery),
    )
    ctx.on(AGENT_DISPOSED, plugin.forget, global_=True)
    ctx.on(PROMPT_ASSEMBLE, hide_from_subagents)
    ctx.register(plugin.dispose)
