"""Building a model request from the log: route proposal, ``request/header``, ``request/context`` (spec 03 §7.1–7.2).

The request a model receives is exactly the log: ``messages`` is ``session.derive_messages()``
and config/tools equal the folded ``request/header`` (P2). Headers and contexts are appended
only when they change, so an unchanged step adds nothing to the prefix (P3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydsh.agent.hooks import AGENT_REQUEST, StepRequest
from pydsh.kernel.cancel import AbortSignal
from pydsh.kernel.errors import PydshError
from pydsh.session.events import FrozenDict, FrozenList, thaw

if TYPE_CHECKING:
    from pydsh.agent.loop import LoopAgent


CONFIG_KEYS = ("provider", "model", "maxTokens", "reasoningEffort", "temperature", "stop")
CONTEXT_KEYS = ("provider", "model", "contextWindow", "systemPromptUpdate")


def canonical_config(config: dict[str, Any]) -> dict[str, Any]:
    """``LlmCallConfig`` with unset fields dropped, keys in the logged order."""
    out = {k: config[k] for k in CONFIG_KEYS if config.get(k) is not None}
    out.update({k: v for k, v in config.items() if k not in out and v is not None and k != "system"})
    return out


def canonical_header(config: dict[str, Any], adapter_defaults: dict[str, Any], tools: list[Any]) -> dict[str, Any]:
    """The header a step would log; it shares the tool schemas (only compared, or copied when appended)."""
    header: dict[str, Any] = {"config": canonical_config(config)}
    if adapter_defaults:
        header["adapterDefaults"] = dict(adapter_defaults)
    if tools:
        header["tools"] = list(tools)
    return header


def request_proposal(header: dict[str, Any]) -> dict[str, Any]:
    """The logged config minus the fields the adapter materialised (so it re-materialises them)."""
    defaults = header.get("adapterDefaults") or {}
    return {k: thaw(v) for k, v in header["config"].items() if not defaults.get(k)}


class NoRouteError(PydshError, RuntimeError):
    """The agent has no provider/model after the ``agent/request`` waterfall."""


class RequestBuilder:
    """Per-agent request state of one loop instance (header logged? last surface generation?)."""

    def __init__(self, agent: LoopAgent) -> None:
        self.agent = agent
        self.header_logged = False
        self.surface_generation: int | None = None

    async def prepare(self, turn: int, step: int, signal: AbortSignal) -> tuple[dict[str, Any], Any]:
        """Propose the route through ``agent/request`` and prepare the call (spec 03 §7.1)."""
        agent = self.agent
        persisted = agent.session.request_header()
        if self.header_logged and persisted is not None:
            default = request_proposal(persisted)
        else:
            default = self._initial_proposal(persisted)
        payload = StepRequest(agent=agent, turn=turn, step=step, signal=signal)
        proposed = await agent.ctx.waterfall(AGENT_REQUEST, payload, lambda: dict(default), scope=agent)
        if not proposed.get("provider") or not proposed.get("model"):
            raise NoRouteError(
                f'agent "{agent.id}" has no provider/model: set AgentOptions.provider and AgentOptions.model '
                "or supply both via the agent/request waterfall"
            )
        return proposed, await agent.loop.prepare_call(proposed, signal)

    def _initial_proposal(self, persisted: dict[str, Any] | None) -> dict[str, Any]:
        options = self.agent.options
        route = {"provider": options.provider or "", "model": options.model or ""}
        effort = options.reasoning_effort
        if effort is None and persisted is not None:
            config = persisted["config"]
            same_route = (config.get("provider"), config.get("model")) == (route["provider"], route["model"])
            if same_route and not (persisted.get("adapterDefaults") or {}).get("reasoningEffort"):
                effort = config.get("reasoningEffort")
        proposal: dict[str, Any] = dict(route)
        if effort is not None:
            proposal["reasoningEffort"] = effort
        if options.max_tokens is not None:
            proposal["maxTokens"] = options.max_tokens
        return proposal

    def tools_changed(self, prepared: Any, tools: list[Any]) -> bool:
        """Whether the tool list differs from the logged header on a route without in-band tool updates."""
        if prepared is not None and prepared.tool_update:
            return False
        baseline = self.agent.session.request_header()
        return baseline is not None and baseline.get("tools", []) != list(tools)

    def starts_series(self, requested: bool) -> bool:
        generation = self.agent.session.surface.content_generation
        return requested or (self.surface_generation is not None and self.surface_generation != generation)

    def build(self, config: dict[str, Any], prepared: Any, tools: list[Any], requested_series: bool) -> dict[str, Any]:
        """Log ``request/header`` / ``developer/message`` / ``request/context`` as needed; return the request."""
        agent = self.agent
        session = agent.session
        generation = session.surface.content_generation
        resolved = prepared.config if prepared is not None else config
        defaults = prepared.adapter_defaults if prepared is not None else {}
        header = canonical_header(resolved, defaults, tools)
        baseline = session.request_header()
        starts = self.starts_series(requested_series)
        header_seq: int | None = None
        series = {"startsSeries": True} if starts else {}
        if not self.header_logged:
            reason = "initial" if baseline is None else "resume"
            header_seq = session.append("request/header", {"header": header, "reason": reason, **series})["seq"]
            self.header_logged = True
        elif baseline is None or header != baseline:
            header_seq = session.append("request/header", {"header": header, "reason": "change", **series})["seq"]
        elif starts:
            session.append("request/header", {"header": header, "reason": "series"})
        if baseline is not None and header_seq is not None:
            self._announce_tool_changes(baseline, header, header_seq)
        self.surface_generation = generation
        self._log_context(resolved, prepared)
        return self._request()

    def _request(self) -> FrozenDict:
        """The frozen request: the logged header's config and tools plus the derived messages (P2)."""
        session = self.agent.session
        logged = session.request_header()
        assert logged is not None
        request = {
            **logged["config"],
            "messages": FrozenList(session.derive_messages()),
            "toolHistory": FrozenList(session.tool_history()),
            "sessionId": session.id,
            "loop_built": True,
        }
        if logged.get("tools"):
            request["tools"] = logged["tools"]
        return FrozenDict(request)

    def _announce_tool_changes(self, baseline: dict[str, Any], header: dict[str, Any], header_seq: int) -> None:
        before = [t["name"] for t in baseline.get("tools", ())]
        after = [t["name"] for t in header.get("tools", ())]
        added = [n for n in after if n not in before]
        removed = [n for n in before if n not in after]
        if not added and not removed:
            return
        content = [{"type": "tool-addition", "toolName": n} for n in added]
        content += [{"type": "tool-removal", "toolName": n} for n in removed]
        message = {"role": "developer", "content": content, "source": {"kind": "tool-registry"}}
        message["id"] = self.agent.new_id()
        data: dict[str, Any] = {"turn": self.agent.turn, "step": self.agent.step, "message": message}
        if added:
            data["headerSeq"] = header_seq
        self.agent.session.append("developer/message", data, surface_op="append")

    def _log_context(self, config: dict[str, Any], prepared: Any) -> None:
        record: dict[str, Any] = {"provider": config["provider"], "model": config["model"]}
        if prepared is not None and prepared.context_window is not None:
            record["contextWindow"] = prepared.context_window
        if prepared is not None and prepared.system_prompt_update:
            record["systemPromptUpdate"] = prepared.system_prompt_update
        logged = self.agent.session.request_context() or {}
        if any(record.get(k) != logged.get(k) for k in CONTEXT_KEYS):
            self.agent.session.append("request/context", record)
