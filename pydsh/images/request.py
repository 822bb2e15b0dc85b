"""Image blocks of the history as a model request shows them (the reference's projection).

The log holds references only; here each ``image`` block becomes, for this request only, a text handle
naming the stored copy followed by the image with its bytes (``data``, base64) for the adapter to encode.
A model without image input gets a one-line placeholder instead, and an image an ``image/offload`` decision
omitted (:mod:`pydsh.images.offload`) a placeholder naming where the stored copy is. Every text is a function
of the logged reference, the logged decisions and the store's path, so a request is rebuilt from the log alone.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from pydsh.images.offload import Budget, fit, marks
from pydsh.images.store import AttachmentStore
from pydsh.llm.prefix import PrefixCache, frozen_run
from pydsh.session.events import FrozenDict, FrozenList
from pydsh.session.log import Session

EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "image/gif": ".gif"}
CACHED = 256
"""Projected messages kept, so a history's frozen prefix stays the same objects from step to step."""


def identity(ref: dict[str, Any]) -> str:
    """The image's name and id, or its id alone."""
    if "name" not in ref:
        return str(ref["attachmentId"])
    return f"{json.dumps(ref['name'], ensure_ascii=False)} ({ref['attachmentId']})"


def access_text(store: AttachmentStore, ref: dict[str, Any]) -> str:
    """Where the stored copy is, its size and type, and how to edit it."""
    path = json.dumps(str(store.path(ref)), ensure_ascii=False)
    return (
        f" Normalized copy (read-only; may be resized or re-encoded): {path} ({ref['width']}x{ref['height']}px,"
        f" {ref['mediaType']}). Source dimensions, format, and byte size may differ. Copy to a writable path"
        f" ending in {EXTENSIONS[ref['mediaType']]} before editing."
    )


def handle_text(store: AttachmentStore, ref: dict[str, Any]) -> str:
    """The text riding before an image sent to the model."""
    return f"Image {identity(ref)}; request preview {ref['width']}x{ref['height']}px." + access_text(store, ref)


def text_only_text(ref: dict[str, Any]) -> str:
    """What a model without image input reads in place of an image."""
    return f"[image omitted because this model accepts text only; attachment sha256:{str(ref['attachmentId'])[7:15]}]"


def offloaded_text(store: AttachmentStore, ref: dict[str, Any]) -> str:
    """What replaces an image compaction offloaded."""
    return f"[image omitted to fit request image limits; {identity(ref)}.{access_text(store, ref)}]"


class Projection:
    """Rewrites the image blocks of request messages, keeping each rewritten message for reuse."""

    def __init__(self, store: AttachmentStore) -> None:
        self.store = store
        self.kept: OrderedDict[Key, tuple[dict[str, Any], dict[str, Any]]] = OrderedDict()

    def messages(
        self, messages: list[dict[str, Any]], vision: bool, offloaded: dict[int, frozenset[int]]
    ) -> list[dict[str, Any]]:
        """``messages`` with every message that holds an image projected (the others as they are);
        ``offloaded`` names the omitted image indexes by the identity of their message."""
        return [self.message(m, vision, offloaded.get(id(m), NONE)) if _has_image(m) else m for m in messages]

    def message(self, message: dict[str, Any], vision: bool, gone: frozenset[int] = frozenset()) -> dict[str, Any]:
        key = (id(message), vision, gone)
        hit = self.kept.get(key)
        if hit is not None and hit[0] is message:
            self.kept.move_to_end(key)
            return hit[1]
        content: list[Any] = []
        index = 0
        for block in message["content"]:
            if block.get("type") != "image":
                content.append(block)
                continue
            content.extend(self.block({**block, "offloaded": True} if index in gone else block, vision))
            index += 1
        projected = {**message, "content": FrozenList(content)}
        result = FrozenDict(projected) if type(message) is FrozenDict else projected
        self.kept[key] = (message, result)
        while len(self.kept) > CACHED:
            self.kept.popitem(last=False)
        return result

    def block(self, block: dict[str, Any], vision: bool) -> list[dict[str, Any]]:
        ref = block["attachment"]
        if block.get("offloaded"):
            return [{"type": "text", "text": offloaded_text(self.store, ref)}]
        if not vision:
            return [{"type": "text", "text": text_only_text(ref)}]
        data = base64.b64encode(self.store.read(ref)).decode("ascii")
        handle = {"type": "text", "text": handle_text(self.store, ref)}
        return [handle, {"type": "image", "attachment": ref, "data": data}]


Key = tuple[int, bool, frozenset[int]]
NONE: frozenset[int] = frozenset()


def _has_image(message: dict[str, Any]) -> bool:
    return any(b.get("type") == "image" for b in message.get("content") or ())


Resolve = Callable[[str, str], Awaitable[bool]]
Find = Callable[[str], Session | None]


def projector(
    projection: Projection, vision: Resolve, session_of: Find, budget: Budget
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """The call options an adapter sees: those of a request holding images get their messages projected.

    An agent's request (built from its session's log) first offloads the oldest images when an image route's
    budget would be exceeded; the omissions its log records apply on every route."""

    plain: PrefixCache[None] = PrefixCache()
    """By session, the logged messages already found to hold no image: a step looks at what it added."""

    async def project(options: dict[str, Any]) -> dict[str, Any]:
        messages = options.get("messages") or []
        key = options.get("sessionId")
        kept = plain.resume(key, messages) if key else None
        start = 0 if kept is None else kept[0]
        if not any(_has_image(m) for m in messages[start:]):
            if key and (end := frozen_run(messages, start)) > start:
                plain.store(key, messages[:end], None)
            return options
        capable = await vision(str(options.get("provider")), str(options.get("model")))
        session = session_of(str(options.get("sessionId"))) if options.get("loop_built") else None
        if session is not None and capable:
            fit(session, budget)
        offloaded = marks(session) if session is not None else {}
        return {**options, "messages": projection.messages(messages, capable, offloaded)}

    return project
