"""``tool-result-pruner``: cut the middle out of oversized tool results (spec 10 §4.7).

Model-free and deterministic: each current ``tool/result`` node whose text is longer than
``thresholdChars`` code points is replaced by a copy that keeps its head and tail around a
marker. Each replace is preceded by ``compaction/prune`` (the shadow-price claim of the meter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydsh.compaction.engine import config_error
from pydsh.compaction.heuristic import estimate_message
from pydsh.compaction.keys import TOOL_RESULT_PRUNER
from pydsh.kernel.config import BaseModel, ConfigDict, Field, model_validator
from pydsh.kernel.context import Context

if TYPE_CHECKING:
    from pydsh.session.log import Session

MARKER = "\n\n[... tool result middle pruned ...]\n\n"


class Config(BaseModel):
    """Pruner sizes in Unicode code points; head + marker + tail must fit under the threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thresholdChars: int = Field(default=8192, gt=0)
    headChars: int = Field(default=4096, ge=0)
    tailChars: int = Field(default=1024, ge=0)

    @model_validator(mode="after")
    def _fits(self) -> Config:
        if self.headChars + len(MARKER) + self.tailChars > self.thresholdChars:
            raise config_error(
                f"tool-result-pruner: headChars ({self.headChars}) + marker ({len(MARKER)}) + tailChars "
                f"({self.tailChars}) must not exceed thresholdChars ({self.thresholdChars})"
            )
        return self


def pruned_content(content: list[dict[str, Any]], config: Config) -> list[dict[str, Any]] | None:
    """``content`` with the middle of its text cut out once, or ``None`` when it is short enough."""
    texts = [b["text"] for b in content if b.get("type") == "text"]
    total = sum(len(t) for t in texts)
    if total <= config.thresholdChars:
        return None
    head_end, tail_start = config.headChars, total - config.tailChars
    out: list[dict[str, Any]] = []
    offset = 0
    marked = False
    for block in content:
        if block.get("type") != "text":
            out.append(dict(block))
            continue
        text = block["text"]
        start, end = offset, offset + len(text)
        offset = end
        kept = text[: max(0, min(end, head_end) - start)]
        if end > head_end and not marked:
            kept += MARKER
            marked = True
        kept += text[max(0, tail_start - start) :] if end > tail_start else ""
        if kept:
            out.append({**block, "text": kept})
    return out


class ToolResultPruner:
    """The ``tool_result_pruner`` service."""

    def __init__(self, config: Config) -> None:
        self.config = config

    def prune_session(self, session: Session) -> int:
        """Prune every oversized current tool result; the number of results pruned."""
        pruned = 0
        for seq in list(session.surface.nodes):
            event = session.events[seq]
            if event["type"] != "tool/result":
                continue
            message = event["data"]["message"]
            content = pruned_content(list(message["content"]), self.config)
            if content is None:
                continue
            shadowed = estimate_message(message)
            session.append(
                "compaction/prune",
                {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq], "shadowedTokenCount": shadowed},
            )
            data = {**event["data"], "message": {**message, "content": content}}
            replace = {"op": "replace", "startSeq": seq, "endSeq": seq}
            session.append("tool/result", data, surface_op=replace, source_event_seqs=[seq])
            pruned += 1
        return pruned


name = "tool-result-pruner"


def apply(ctx: Context, config: Config) -> None:
    """Provide ``tool_result_pruner`` (inside the preset's isolate realm when a preset mounts it)."""
    ctx.provide(TOOL_RESULT_PRUNER, ToolResultPruner(config))
