"""Hosts with compaction on a small context window, and a summariser served beside the conversation script."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydsh.compaction.summary import SECTIONS
from pydsh.llm.hooks import LLM_STREAM
from pydsh.llm.scripted import compile_entry, play
from tests.agent.harness import Host, start_host

FAST_RETRY = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}}
WINDOW = 8000
COMPACTION = {"headroomTokens": 1000, "thresholdRatio": 0.8, "retainRatio": 0.16}
"""8,000-token window, 1,000 reserved for output: threshold min(6400, 7000 - 1000) = 6000, retain 1120."""
THRESHOLD = 6000


def providers(window: int | None = WINDOW, max_tokens: int = 1000) -> list[dict[str, Any]]:
    """The default route with ``window`` (``None``: a model info without a context window)."""
    model: dict[str, Any] = {"id": "deepseek-v4-flash", "defaultMaxTokens": max_tokens}
    if window is not None:
        model["contextWindow"] = window
    return [{"id": "deepseek-official", "name": "DeepSeek (scripted)", "retryPolicy": FAST_RETRY, "models": [model]}]


def summary_text(tag: str = "") -> str:
    """A checkpoint with every section of §4.9."""
    return "\n".join(f"## {s}\n- {tag or '(none)'}" for s in SECTIONS)


def rows(compaction: dict[str, Any] | None = None, *, pruner: bool = True) -> list[dict[str, Any]]:
    """The agent plane of these tests: the file tools and the compaction group."""
    out = [
        {"id": "tool-fs", "name": "tool-fs"},
        {"id": "compaction-basic", "name": "compaction-basic", "config": compaction or COMPACTION},
        {"id": "command-compact", "name": "command-compact"},
    ]
    if pruner:
        out.append({"id": "tool-result-pruner", "name": "tool-result-pruner"})
    return out


class Summariser:
    """Serves every ``purpose: "compaction"`` call (before the scripted adapter) and records its options."""

    def __init__(self, host: Host) -> None:
        self.calls: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.on_request: Callable[[dict[str, Any]], None] | None = None
        host.kernel.ctx.on(LLM_STREAM, self._serve, before=LLM_STREAM.order, global_=True)

    async def _serve(self, options: dict[str, Any], nxt: Callable[[], Awaitable[Any]]) -> Any:
        if options.get("purpose") != "compaction":
            if options.get("loop_built") and self.on_request is not None:
                self.on_request(options)
            return await nxt()
        self.calls.append(dict(options))
        entry = self.answers.pop(0) if self.answers else {"text": summary_text(f"call {len(self.calls)}")}
        return play(compile_entry(entry, len(self.calls)), options)


async def compaction_host(
    script: list[Any],
    compaction: dict[str, Any] | None = None,
    *,
    window: int | None = WINDOW,
    pruner: bool = True,
    patches: tuple[list[dict[str, Any]], ...] = (),
) -> tuple[Host, Summariser]:
    host = await start_host(
        script,
        bundles=("base",),
        patches=([{"insert": rows(compaction, pruner=pruner)}], *patches),
        providers=providers(window),
    )
    return host, Summariser(host)


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def write_lines(path: Path, n: int, width: int = 60) -> None:
    path.write_text("".join(f"{i:04d} " + "x" * width + "\n" for i in range(n)))
