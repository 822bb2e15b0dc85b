"""A session's model route as the editor picks it: the ``model`` and ``reasoning_effort`` config options
(spec 11 §A.6), built from the llm service's catalogs, and the editor's choice checked against them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp.schema import (
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionConfigSelectOption,
)

from pydsh.agent.model_selection import Route
from pydsh.apps.acp.wire import invalid
from pydsh.llm.keys import LLM
from pydsh.llm.types import LlmError, ModelInfo, ModelReasoning

if TYPE_CHECKING:
    from pydsh.kernel.context import Context

ConfigOptions = list[SessionConfigOptionSelect | SessionConfigOptionBoolean]


@dataclass
class Selection:
    """A session's model route as the editor chose it; ``effort`` ``None`` = the model's default."""

    provider: str
    model: str
    effort: str | None = None

    def route(self) -> Route:
        return Route(self.provider, self.model, self.effort)


class ModelOptions:
    """The config options of a selection, and the selection an editor's choice makes."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def options(self, selection: Selection | None) -> ConfigOptions:
        """The ``model`` option, and ``reasoning_effort`` when the model has efforts (none without a selection)."""
        if selection is None:
            return []
        options: ConfigOptions = [await self._model_option(selection)]
        effort = await self._effort_option(selection)
        if effort is not None:
            options.append(effort)
        return options

    async def choose(self, current: Selection, config_id: str, value: str) -> Selection:
        """The selection after the editor set ``config_id`` (``model`` or ``reasoning_effort``) to ``value``;
        the route resolves, or the choice is invalid."""
        chosen = await (self._choose_model if config_id == "model" else self._choose_effort)(current, value)
        config: dict[str, Any] = {"provider": chosen.provider, "model": chosen.model}
        if chosen.effort is not None:
            config["reasoningEffort"] = chosen.effort
        try:
            await self.ctx.require(LLM).resolve_call_config(config)
        except LlmError as exc:
            raise invalid(exc.message) from None
        return chosen

    async def _model_option(self, selection: Selection) -> SessionConfigOptionSelect:
        llm = self.ctx.require(LLM)
        groups: list[SessionConfigSelectGroup] = []
        for provider, models in await llm.catalogs():
            pid = provider["id"]
            entries = [_model_entry(pid, m) for m in models]
            if pid == selection.provider and all(m["id"] != selection.model for m in models):
                current = SessionConfigSelectOption(value=_route_value(pid, selection.model), name=selection.model)
                entries.insert(0, current)
            if entries:
                groups.append(SessionConfigSelectGroup(group=pid, name=provider["name"], options=entries))
        return SessionConfigOptionSelect(
            id="model",
            name="Model",
            category="model",
            type="select",
            current_value=_route_value(selection.provider, selection.model),
            options=groups,
        )

    async def _reasoning(self, provider: str, model: str) -> ModelReasoning | None:
        try:
            info = await self.ctx.require(LLM).resolve_model_info(provider, model)
        except LlmError:
            return None
        return info.get("reasoning")

    async def _effort_option(self, selection: Selection) -> SessionConfigOptionSelect | None:
        reasoning = await self._reasoning(selection.provider, selection.model)
        if not reasoning:
            return None
        default = reasoning.get("defaultEffort")
        values = [] if default is not None else [SessionConfigSelectOption(value="", name="Provider default")]
        for effort in reasoning["efforts"]:
            described: dict[str, Any] = {"description": effort["description"]} if effort.get("description") else {}
            values.append(SessionConfigSelectOption(value=effort["id"], name=effort["name"], **described))
        return SessionConfigOptionSelect(
            id="reasoning_effort",
            name="Reasoning effort",
            category="thought_level",
            type="select",
            current_value=selection.effort or default or "",
            options=values,
        )

    async def _choose_model(self, current: Selection, value: str) -> Selection:
        option = await self._model_option(current)
        offered = {
            o.value for group in option.options if isinstance(group, SessionConfigSelectGroup) for o in group.options
        }
        if value not in offered:
            raise invalid(f"unknown model option: {value}")
        provider, model = json.loads(value)
        return Selection(provider, model)

    async def _choose_effort(self, current: Selection, value: str) -> Selection:
        option = await self._effort_option(current)
        offered = {o.value for o in option.options if isinstance(o, SessionConfigSelectOption)} if option else set()
        if value not in offered:
            raise invalid(f"unknown reasoning effort for {current.provider}/{current.model}: {value}")
        return Selection(current.provider, current.model, value or None)


def check_choice(config_id: str, value: object) -> str:
    """``value`` when ``config_id`` is an option a session has and ``value`` is a select value."""
    if config_id not in ("model", "reasoning_effort"):
        raise invalid(f"unknown session config option: {config_id}")
    if not isinstance(value, str):
        raise invalid(f"{config_id} requires a select value")
    return value


def _route_value(provider: str, model: str) -> str:
    return json.dumps([provider, model], separators=(",", ":"), ensure_ascii=False)


def _model_entry(provider: str, info: ModelInfo) -> SessionConfigSelectOption:
    described: dict[str, Any] = {"description": info["description"]} if info.get("description") else {}
    return SessionConfigSelectOption(value=_route_value(provider, info["id"]), name=info["name"], **described)
