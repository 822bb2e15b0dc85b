"""The ``team-models`` plugin: per-teammate model routes for Agent Teams (spec 08 Part B).

One :class:`~pydsh.plugin.ModelSelection` is installed per live teammate (never the Lead); its
``current`` route follows the precedence override > Team default > base and is recomputed on every
change, so a change applies from the teammate's next step. Authority comes from the calling agent
through the ``agent_teams`` service's public API; routes persist in the state file of ``state.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from pydsh.plugin import (
    AGENT_CREATED,
    AGENT_DISPOSED,
    AGENT_TEAMS,
    AGENTS,
    LLM,
    ROUTES_CHANGED,
    SESSION_QUERY,
    TEAM_ROUTES,
    TOOLS,
    AgentCreated,
    AgentRef,
    Context,
    Membership,
    ModelSelection,
    Route,
    ToolDefinition,
    ToolError,
    ToolExec,
    ToolOutcome,
    dsh_home,
    install_model_selection,
)
from pydsh_team_models.state import Reports, StateStore, StorageError, TeamEntry, route_json

log = logging.getLogger("pydsh_team_models")
LEAD = "lead"
LIVE_PHASES = ("active", "provisioning")

DESCRIPTIONS = {
    "team_model_list": (
        "List each teammate's model route: its override, the Team default, and the route its next request will "
        "use. Any Team member may call this."
    ),
    "team_model_set": (
        "Override the model route one teammate uses from its next step on, without interrupting a request in "
        "flight. The Team Lead may set any teammate; a teammate may set only itself."
    ),
    "team_model_reset": (
        "Remove model overrides. Pass target to clear one teammate (a teammate may clear only itself), or all: "
        "true to clear every override (Team Lead only). A teammate without an override uses the Team default, "
        "else the route it was started with."
    ),
    "team_model_default": (
        "Set or clear the Team default route used by teammates without an override. Team Lead only. Pass model "
        "to set it, or clear: true to remove it."
    ),
}
TARGET = {"type": "string", "description": "Teammate name from list_agents."}
MODEL = {
    "type": "string",
    "description": 'Route as "<provider>/<model>", for example "deepseek-official/deepseek-v4-flash".',
}
EFFORT = {
    "type": "string",
    "description": "Optional reasoning effort for this route; omit to use the model's default.",
}
PARAMETERS: dict[str, dict[str, Any]] = {
    "team_model_list": {"type": "object", "properties": {}},
    "team_model_set": {
        "type": "object",
        "properties": {"target": TARGET, "model": MODEL, "reasoning_effort": EFFORT},
        "required": ["target", "model"],
    },
    "team_model_reset": {
        "type": "object",
        "properties": {
            "target": TARGET,
            "all": {"type": "boolean", "description": "true clears every override (Team Lead only)."},
        },
    },
    "team_model_default": {
        "type": "object",
        "properties": {
            "model": MODEL,
            "reasoning_effort": EFFORT,
            "clear": {"type": "boolean", "description": "true removes the Team default."},
        },
    },
}


class Config(BaseModel):
    """The ``team-models`` row (spec 08 §B.5); ``null`` or ``""`` means unset."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    defaultModel: str | None = None
    defaultReasoningEffort: str | None = None
    stateFile: str | None = None
    echoSelection: bool = True


def fail(code: str, message: str) -> ToolError:
    return ToolError(message, code, name="TeamModelsError")


def parse_route(model: object, effort: object) -> Route:
    """``"<provider>/<model>"`` split at the first ``/`` (``TEAM_MODEL_INVALID_ROUTE``)."""
    provider, _, name = model.partition("/") if isinstance(model, str) else ("", "", "")
    if not provider.strip() or not name.strip():
        raise fail("TEAM_MODEL_INVALID_ROUTE", 'model must be "<provider>/<model>"')
    if effort is not None and (not isinstance(effort, str) or not effort.strip()):
        raise fail("TEAM_MODEL_INVALID_ROUTE", "reasoning_effort must be a non-empty string")
    return Route(provider.strip(), name.strip(), effort.strip() if isinstance(effort, str) else None)


def config_default(config: Config) -> Route | None:
    """The configured default route; an invalid one is a warning and unset (start-up continues)."""
    if not config.defaultModel:
        return None
    try:
        return parse_route(config.defaultModel, config.defaultReasoningEffort or None)
    except ToolError as exc:
        log.warning("team-models: ignoring defaultModel %r: %s", config.defaultModel, exc.message)
        return None


def team_default(entry: TeamEntry, configured: Route | None) -> Route | None:
    """The Team default in force: the stored one (``None`` once cleared), else the configured one."""
    return entry.default if entry.has_default else configured


def precedence(entry: TeamEntry, configured: Route | None, name: str) -> tuple[Route | None, str]:
    """The selected route (``None`` = base) and its source: override > Team default > base (B.6)."""
    override = entry.overrides.get(name)
    if override is not None:
        return override, "override"
    default = team_default(entry, configured)
    return (default, "team-default") if default is not None else (None, "base")


@dataclass
class Installed:
    """One live teammate's selection and its place in a Team."""

    agent: Any
    selection: ModelSelection
    team_id: str
    name: str


class TeamModels:
    """The state, the live selections and the four tools."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.teams = ctx.require(AGENT_TEAMS)
        self.llm: Any = ctx.require(LLM)
        path = Path(config.stateFile) if config.stateFile else dsh_home() / "storages" / "team-models" / "state.json"
        self.store = StateStore(path.expanduser())
        self.store.load()
        self.default = config_default(config)
        self.live: dict[str, Installed] = {}
        self._warn_unknown_providers()
        self.pruning: asyncio.Task[None] = asyncio.get_running_loop().create_task(self.prune())
        """Pruning runs after start, so a large file costs a start no more than reading it."""

    def _warn_unknown_providers(self) -> None:
        """Stored routes naming a provider without an adapter are kept (nothing is lost) but named once."""
        report = Reports(log.warning)
        for team_id, entry in self.store.teams.items():
            routes = [("default", entry.default), *((f"member {n} override", r) for n, r in entry.overrides.items())]
            for where, route in routes:
                if route is not None and not self.llm.has_adapter(route.provider):
                    report(
                        'team-models: team %s %s names provider "%s", which has no adapter; its requests fail '
                        "until it is reset",
                        team_id,
                        where,
                        route.provider,
                    )
        report.close("stored routes name a provider without an adapter")

    async def prune(self) -> None:
        """Forget the stored Teams whose Lead session no longer exists, so the file does not grow without bound.

        A Team lives in its Lead's log (its id is the Lead's Session id): once the session store neither
        lists that session nor has it live, the Team cannot come back. One listing of the store decides for
        every Team; a store that lists no stored session at all proves nothing and prunes nothing. Only Teams
        read at start are candidates, so a Team another process writes meanwhile is kept.
        """
        known = set(self.store.teams)
        if not known:
            return
        try:
            rows = await self.ctx.require(SESSION_QUERY).list_sessions()
        except Exception as exc:
            log.warning("team-models: could not list sessions, so the state file was not pruned: %s", exc)
            return
        if not any("persisted" in row for row in rows):
            return
        gone = known - {str(row["header"]["id"]) for row in rows}
        if not gone:
            return
        try:
            removed = await self.store.prune(gone)
        except StorageError as exc:
            log.warning("team-models: could not prune the state file: %s", exc)
            return
        log.info("team-models: pruned %d Teams whose Lead session no longer exists", removed)

    async def stop(self) -> None:
        """Cancel pruning when the plugin unloads (a prune either replaces the file whole or not at all)."""
        self.pruning.cancel()
        await asyncio.gather(self.pruning, return_exceptions=True)

    # -- precedence -----------------------------------------------------------------------------

    def team_default(self, team_id: str) -> Route | None:
        return team_default(self.store.team(team_id), self.default)

    def effective(self, team_id: str, name: str) -> tuple[Route | None, str]:
        return precedence(self.store.team(team_id), self.default, name)

    def route(self, team_id: str, name: str) -> tuple[dict[str, str] | None, str]:
        """The ``team_routes`` service: the selected route (``None`` = base) and its source."""
        route, source = self.effective(team_id, name)
        return (route_json(route) if route is not None else None), source

    def _selected(self, installed: Installed) -> Route | None:
        """The route to select: the effective one, or the agent's own route when the log shows another one."""
        route, _ = self.effective(installed.team_id, installed.name)
        if route is not None:
            return route
        options = installed.agent.options
        header = installed.agent.session.request_header()
        if header is None or not options.provider or not options.model:
            return None
        logged = header["config"]
        if (logged.get("provider"), logged.get("model")) == (options.provider, options.model):
            return None
        return Route(options.provider, options.model, options.reasoning_effort or None)

    def refresh(self, team_id: str) -> None:
        for installed in self.live.values():
            if installed.team_id == team_id:
                installed.selection.current = self._selected(installed)

    # -- lifecycle ------------------------------------------------------------------------------

    def install(self, agent: Any, membership: Membership) -> None:
        installed = Installed(agent, ModelSelection(), membership.team_id, membership.name)
        installed.selection.current = self._selected(installed)
        install_model_selection(agent.ctx, installed.selection, owner=self.ctx)
        self.live[agent.id] = installed

    def forget(self, payload: AgentRef) -> None:
        agent = payload["agent"]
        installed = self.live.get(agent.id)
        if installed is not None and installed.agent is agent:
            del self.live[agent.id]

    # -- authority ------------------------------------------------------------------------------

    def _teammates(self, membership: Membership) -> list[Any]:
        """Active and provisioning teammates in creation order (the roster's stored rows)."""
        state = self.teams.sound_state(membership.lead)
        return [m for m in state.members.values() if m.phase in LIVE_PHASES]

    def _target(self, membership: Membership, target: object) -> str:
        """A target the caller may manage (B.3), checked before anything changes."""
        if not isinstance(target, str) or not target.strip():
            raise fail("TEAM_MODEL_INVALID_ARGUMENT", "target must be a teammate name")
        name = target.strip()
        if name == LEAD:
            raise fail("TEAM_MODEL_LEAD_NOT_MANAGED", "the Team Lead's model is not managed by team models")
        if membership.role != "lead" and name != membership.name:
            raise fail("TEAM_MODEL_FORBIDDEN_TARGET", "a teammate may change only its own model route")
        if name not in {m.name for m in self._teammates(membership)}:
            raise fail("TEAM_MEMBER_NOT_FOUND", f'active teammate "{name}" not found')
        return name

    async def _validated(self, model: object, effort: object) -> Route:
        """A parsed route whose provider is registered and which the resolver accepts (fail early)."""
        route = parse_route(model, effort)
        if not self.llm.has_adapter(route.provider):
            raise fail("TEAM_MODEL_INVALID_ROUTE", f'no adapter registered for provider "{route.provider}"')
        config = {"provider": route.provider, "model": route.model}
        if route.reasoning_effort is not None:
            config["reasoningEffort"] = route.reasoning_effort
        try:
            await self.llm.resolve_call_config(config)
        except Exception as exc:
            raise fail("TEAM_MODEL_INVALID_ROUTE", getattr(exc, "message", None) or str(exc)) from None
        return route

    async def _commit(self, team_id: str, entry: TeamEntry) -> None:
        try:
            await self.store.commit(team_id, entry)
        except StorageError as exc:
            raise fail("TEAM_MODEL_STORAGE", f"could not save team model state: {exc}") from None
        self.refresh(team_id)
        self._echo(team_id)
        self.ctx.emit(ROUTES_CHANGED, team_id)

    def _echo(self, team_id: str) -> None:
        """B.8: append ``model/selection`` to live teammates whose route is selected; failures are only logged."""
        if not self.config.echoSelection:
            return
        for installed in list(self.live.values()):
            route = installed.selection.current
            if installed.team_id != team_id or route is None:
                continue
            try:
                installed.agent.session.append("model/selection", route_json(route))
            except Exception as exc:
                log.debug("team-models: model/selection echo for %s failed: %s", installed.name, exc)

    def _echo_skipped(self, membership: Membership, name: str) -> None:
        if self.config.echoSelection and not any(
            i.team_id == membership.team_id and i.name == name for i in self.live.values()
        ):
            log.debug('team-models: teammate "%s" is not live; model/selection echo skipped', name)

    # -- tools ----------------------------------------------------------------------------------

    async def list_routes(self, membership: Membership, args: dict[str, Any]) -> dict[str, Any]:
        entry = self.store.team(membership.team_id)
        default = self.team_default(membership.team_id)
        members = []
        for member in self._teammates(membership):
            route, source = self.effective(membership.team_id, member.name)
            effective = route if route is not None else await self._base(member.id)
            override = entry.overrides.get(member.name)
            members.append(
                {
                    "target": member.name,
                    "override": route_json(override) if override is not None else None,
                    "effective": route_json(effective) if effective is not None else None,
                    "source": source,
                }
            )
        return {"teamDefault": route_json(default) if default is not None else None, "members": members}

    async def _base(self, member_id: str) -> Route | None:
        """A teammate's own route: its live options, else its descriptor's route."""
        live = self.ctx.require(AGENTS).get(member_id)
        if live is not None and live.options.provider and live.options.model:
            return Route(live.options.provider, live.options.model, live.options.reasoning_effort or None)
        read = await self.ctx.require(SESSION_QUERY).read_session(member_id)
        descriptor: dict[str, Any] = next((e["data"] for e in read["events"] if e["type"] == "subagent/descriptor"), {})
        if descriptor.get("agentProvider") and descriptor.get("agentModel"):
            return Route(descriptor["agentProvider"], descriptor["agentModel"], descriptor.get("agentReasoningEffort"))
        return None

    async def set_route(self, membership: Membership, args: dict[str, Any]) -> dict[str, Any]:
        name = self._target(membership, args.get("target"))
        route = await self._validated(args.get("model"), args.get("reasoning_effort"))
        entry = self.store.team(membership.team_id).copy()
        entry.overrides[name] = route
        await self._commit(membership.team_id, entry)
        self._echo_skipped(membership, name)
        return {"target": name, "override": route_json(route), "appliesFrom": "next-step"}

    async def reset(self, membership: Membership, args: dict[str, Any]) -> dict[str, Any]:
        has_target, has_all = args.get("target") is not None, args.get("all") is not None
        if has_target == has_all or (has_all and args["all"] is not True):
            raise fail("TEAM_MODEL_INVALID_ARGUMENT", "team_model_reset requires exactly one of target or all: true")
        entry = self.store.team(membership.team_id).copy()
        if has_all:
            if membership.role != "lead":
                raise fail("TEAM_LEAD_REQUIRED", "only the Team Lead can clear every model override")
            cleared = list(entry.overrides)
        else:
            name = self._target(membership, args["target"])
            cleared = [name] if name in entry.overrides else []
        if cleared:
            entry.overrides = {k: v for k, v in entry.overrides.items() if k not in cleared}
            await self._commit(membership.team_id, entry)
        return {"cleared": cleared}

    async def set_default(self, membership: Membership, args: dict[str, Any]) -> dict[str, Any]:
        if membership.role != "lead":
            raise fail("TEAM_LEAD_REQUIRED", "only the Team Lead can change the Team default model")
        has_model, has_clear = args.get("model") is not None, args.get("clear") is not None
        if has_model == has_clear or (has_clear and args["clear"] is not True):
            raise fail("TEAM_MODEL_INVALID_ARGUMENT", "team_model_default requires exactly one of model or clear: true")
        entry = self.store.team(membership.team_id).copy()
        entry.has_default = True
        entry.default = await self._validated(args["model"], args.get("reasoning_effort")) if has_model else None
        await self._commit(membership.team_id, entry)
        return {"teamDefault": route_json(entry.default) if entry.default is not None else None}


Body = Callable[[Membership, dict[str, Any]], Awaitable[dict[str, Any]]]


def definitions(plugin: TeamModels) -> list[ToolDefinition]:
    bodies: dict[str, Body] = {
        "team_model_list": plugin.list_routes,
        "team_model_set": plugin.set_route,
        "team_model_reset": plugin.reset,
        "team_model_default": plugin.set_default,
    }
    return [_definition(plugin, name, body) for name, body in bodies.items()]


def _definition(plugin: TeamModels, name: str, body: Body) -> ToolDefinition:
    async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
        if exec.agent is None:
            raise ToolError(f"{name} requires a calling Agent")
        membership = plugin.teams.membership(exec.agent)
        value = await body(membership, args if isinstance(args, dict) else {})
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return ToolOutcome([{"type": "text", "text": text}], False, None, value)

    return ToolDefinition(name, DESCRIPTIONS[name], PARAMETERS[name], execute)


name = "team-models"
inject = (AGENT_TEAMS, AGENTS, LLM, SESSION_QUERY, TOOLS)


def apply(ctx: Context, config: Config) -> None:
    """Mount the tools in each Team member's scope and a selection on each teammate, as agents are created."""
    plugin = TeamModels(ctx, config)
    ctx.register(plugin.stop)
    ctx.provide(TEAM_ROUTES, plugin)
    tools = ctx.require(TOOLS)

    def mount(agent: Any) -> None:
        membership = plugin.teams.try_membership(agent)
        if membership is None:
            return
        for definition in definitions(plugin):
            agent.ctx.register(ctx.register(tools.register(agent.ctx, definition)))
        if membership.role == "teammate":
            plugin.install(agent, membership)

    async def on_created(payload: AgentCreated) -> None:
        mount(payload["agent"])

    ctx.on(AGENT_CREATED, on_created)
    ctx.on(AGENT_DISPOSED, plugin.forget, global_=True)
    for agent in ctx.require(AGENTS).all():
        mount(agent)
