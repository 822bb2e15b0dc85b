"""The bus events the ``llm`` package dispatches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypedDict

from pydsh.kernel.events import Emit, Waterfall

if TYPE_CHECKING:
    from pydsh.llm.types import StreamChunk


class AdaptersUpdated(TypedDict):
    """Every route that has an adapter now."""

    providers: list[str]


LLM_STREAM: Waterfall[dict[str, Any], AsyncIterator[StreamChunk] | None] = Waterfall(
    "llm/stream",
    "around every model call: a listener may flush, pace, serve or wrap the stream; next() reaches the adapter",
    order=(
        "stream-pacing",
        "invariant:model-called",
        "invariant:request-logged",
        "session-checkpoint-policy",
        "llm-replay",
    ),
)
ADAPTERS_UPDATED: Emit[AdaptersUpdated] = Emit("llm/adapters-updated", "a route gained or lost its adapter")
