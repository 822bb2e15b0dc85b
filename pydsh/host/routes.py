"""Switching a live agent's model route from a frontend: the route is checked against the provider's catalog,
then the agent's next steps use it and the log records it as ``model/selection`` (spec 12 F26).

The web's model picker and the terminal's ``/model`` and ``/effort`` share these rules.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydsh.host.errors import HostError
from pydsh.llm.keys import LLM

if TYPE_CHECKING:
    from pydsh.agent.model_selection import ModelSelection
    from pydsh.contract.agent import Agent
    from pydsh.kernel.context import Context


@dataclass(frozen=True)
class RouteChoice:
    """A provider, a model of its catalog and optionally a reasoning effort that model offers."""

    provider: str
    model: str
    effort: str | None = None


async def check_route(ctx: Context, choice: RouteChoice) -> None:
    """``HostError`` (``unknown_model`` or ``unknown_effort``) unless the provider has an adapter and its
    catalog has the model (and the effort); a provider without a catalog takes any model."""
    llm = ctx.require(LLM)
    if not llm.has_adapter(choice.provider):
        raise HostError(f'Unknown provider "{choice.provider}".', "unknown_model")
    catalog = await llm.list_models(choice.provider)
    info = next((m for m in catalog if m["id"] == choice.model), None)
    if catalog and info is None:
        raise HostError(f'Provider "{choice.provider}" has no model "{choice.model}".', "unknown_model")
    reasoning = info.get("reasoning") if info is not None else None
    efforts = [e["id"] for e in reasoning["efforts"]] if reasoning else []
    if choice.effort is not None and choice.effort not in efforts:
        raise HostError(f'Model "{choice.model}" offers no effort "{choice.effort}".', "unknown_effort")


class RouteSelections:
    """One frontend's model selections, one per live agent it switched (installed on first use)."""

    def __init__(self, owner: Context) -> None:
        self.owner = owner
        self._selections: weakref.WeakKeyDictionary[Agent, ModelSelection] = weakref.WeakKeyDictionary()

    def current(self, agent: Agent) -> dict[str, Any] | None:
        """The route this frontend selected for ``agent`` (``None``: it selected none)."""
        selection = self._selections.get(agent)
        route = selection.current if selection is not None else None
        if route is None:
            return None
        out = {"provider": route.provider, "model": route.model}
        if route.reasoning_effort:
            out["reasoningEffort"] = route.reasoning_effort
        return out

    async def select(self, agent: Agent, choice: RouteChoice) -> dict[str, Any]:
        """Check ``choice``, route ``agent``'s next steps to it and log the ``model/selection`` data."""
        from pydsh.agent.model_selection import ModelSelection, Route, install_model_selection

        await check_route(self.owner, choice)
        selection = self._selections.get(agent)
        if selection is None:
            selection = ModelSelection()
            install_model_selection(agent.ctx, selection, owner=self.owner)
            self._selections[agent] = selection
        selection.current = Route(choice.provider, choice.model, choice.effort)
        data = {"provider": choice.provider, "model": choice.model}
        if choice.effort:
            data["reasoningEffort"] = choice.effort
        agent.session.append("model/selection", data)
        return data
