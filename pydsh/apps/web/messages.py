"""Delivery state of the cross-session messages a session sent (spec 12 F34, 09 §5).

Only when the ``agent-message`` plugin (09) is composed: its own fold of the target's inbox gives
the state (``pending``, ``claimed``, ``discarded``, else ``unknown``; ``answered`` once the target
replied with ``reply_to``), read from the target's log without resuming it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pydsh.apps.web.errors import ApiError

if TYPE_CHECKING:
    from pydsh.apps.web.hub import WebHub

SEND_TOOL = "send_agent_message"


async def delivery(hub: WebHub, session_id: str) -> dict[str, Any]:
    """``{messages: [{messageId, to, toTitle, mode, sentAt, state, replyMessageId?}]}`` in send order."""
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
        entry = {**item, "toTitle": titles[to], "state": state}
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
