"""Delivery state of the cross-session messages a session sent (spec 12 F34, 09 §5).

Only when the ``agent-message`` plugin (09) is composed: its own fold of the target's inbox gives
the state (``pending``, ``claimed``, ``discarded``, else ``unknown``; ``answered`` once the target
replied with ``reply_to``), read from the target's log without resuming it. :class:`DeliveryFeed`
pushes a sender's list on its session stream (a ``messages`` frame) whenever a send or a target's inbox
may have changed it.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING, Any

from pydsh.apps.web.errors import ApiError
from pydsh.apps.web.fanout import Newest

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub
    from pydsh.session.events import Event

log = logging.getLogger("pydsh.web")

SEND_TOOL = "send_agent_message"
FEED_INTERVAL_S = 0.1


async def delivery(hub: WebHub, session_id: str) -> dict[str, Any]:
    """``{messages: [{messageId, to, toTitle, mode, sentAt, state, targetRuntimeStatus, replyMessageId?}]}`` in
    send order (``targetRuntimeStatus``: ``running``, ``idle`` or ``offline`` now)."""
    try:
        plugin: Any = importlib.import_module("pydsh_agent_message.plugin")
    except ImportError:
        raise ApiError(404, "feature_unavailable", "Cross-session messages are not composed.") from None
    fold_inbox, relays_in, state_of = plugin.fold_inbox, plugin.relays_in, plugin.state_of
    session = await hub.views.read(session_id)
    sent = _sent(session.events)
    replies: dict[str, str] = {}
    for relay in relays_in(list(session.events)):
        source = relay["source"]
        if "replyTo" in source:
            replies.setdefault(str(source["replyTo"]), str(relay["id"]))
    folds: dict[str, tuple[set[str], set[str], set[str]]] = {}
    titles: dict[str, str] = {}
    out = []
    for item in sent:
        to = item["to"]
        if to not in folds:
            try:
                target = await hub.views.read(to)
            except ApiError:
                folds[to], titles[to] = (set(), set(), set()), to
            else:
                folds[to], titles[to] = fold_inbox(list(target.events)), hub.views.title_of(target)
        reply = replies.get(item["messageId"])
        state = "answered" if reply is not None else state_of(item["messageId"], *folds[to])
        entry = {**item, "toTitle": titles[to], "state": state, "targetRuntimeStatus": hub.views.status_of(to)}
        if reply is not None:
            entry["replyMessageId"] = reply
        out.append(entry)
    return {"messages": out}


def _sent(events: list[Any]) -> list[dict[str, Any]]:
    """Accepted ``send_agent_message`` results of this log: message id, target, mode, time."""
    calls = {e["data"]["callId"] for e in events if e["type"] == "tool/call" and e["data"].get("name") == SEND_TOOL}
    out = []
    for event in events:
        if event["type"] != "tool/result" or event["data"]["message"].get("toolCallId") not in calls:
            continue
        meta = event["data"].get("meta")
        if isinstance(meta, dict) and meta.get("ok") and meta.get("messageId"):
            out.append(
                {"messageId": meta["messageId"], "to": meta["to"], "mode": meta.get("mode"), "sentAt": event["time"]}
            )
    return out


class DeliveryFeed:
    """Sends ``messages {messages}`` on a sender's session stream when its delivery states may have changed:
    after its own accepted send, when the inbox of a session it sent to (or its own, for replies) changed,
    or when a session it sent to started or finished a turn (the card shows its runtime status).
    Coalesced per sender, and sent only when the list differs from the one sent before."""

    def __init__(self, hub: WebHub) -> None:
        self.hub = hub
        self.targets: dict[str, set[str]] = {}
        """Sender session id -> the sessions it sent to (known once its list was read)."""
        self.last: dict[str, dict[str, Any]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._builds = Newest()

    def note(self, sender: str, view: dict[str, Any]) -> None:
        """Remember a list just read or sent, so later inbox changes of its targets refresh it."""
        self.targets[sender] = {str(m["to"]) for m in view["messages"]}
        self.last[sender] = view

    def changed(self, session_id: str, event: Event) -> None:
        """A session event that may change someone's delivery states."""
        meta = event["data"].get("meta") if event["type"] == "tool/result" else None
        senders = []
        if isinstance(meta, dict) and meta.get("ok") and meta.get("messageId"):
            senders.append(session_id)
            if meta.get("to"):  # known at once, so the target's next status change refreshes this sender
                self.targets.setdefault(session_id, set()).add(str(meta["to"]))
        elif event["type"] == "agent/inbox/spliced":
            senders = [s for s, targets in self.targets.items() if session_id in targets or s == session_id]
        for sender in senders:
            self._refresh(sender)

    def target_status(self, session_id: str) -> None:
        """A session started or finished a turn: the cards of those who sent to it show its runtime status."""
        for sender in [s for s, targets in self.targets.items() if session_id in targets]:
            self._refresh(sender)

    def _refresh(self, sender: str) -> None:
        """Send ``sender``'s list soon if its page still listens, else forget it."""
        if self.hub.streams.sessions_topic.has(sender):
            self._later(sender)
        else:
            self.targets.pop(sender, None)
            self.last.pop(sender, None)

    def _later(self, sender: str) -> None:
        if sender in self._timers or self.hub.stopping:
            return

        def run() -> None:
            self._timers.pop(sender, None)
            asyncio.ensure_future(self._send(sender)).add_done_callback(_log_failure)

        self._timers[sender] = asyncio.get_running_loop().call_later(FEED_INTERVAL_S, run)

    async def _send(self, sender: str) -> None:
        build = self._builds.take(sender)
        try:
            view = await delivery(self.hub, sender)
        except ApiError:
            return
        if not self._builds.newest(sender, build):
            return  # a newer read of this sender's list is under way: it sends
        if view != self.last.get(sender):
            self.note(sender, view)
            self.hub.streams.sessions_topic.publish(sender, ("messages", view, None))

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("web delivery update failed", exc_info=task.exception())
