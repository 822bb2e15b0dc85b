"""The web app's own state around the hub: auth, static files, panels, workspaces, settings,
providers and keys, log files (spec 12 §2, §3.8, §5, §7).

Files under ``$DSH_HOME/web/``: ``secret`` (cookie key), ``settings.json`` (revisioned UI
preferences), ``known-workspaces.json``. Provider entries and the default route (shared with the
command line) go to the ``web`` profile's ``patch.yml``; keys to ``$DSH_HOME/credentials.json``
(0600) and are never read back out.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import os
import re
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from pydsh import __version__
from pydsh.agent.hooks import PRE_STEP
from pydsh.agent.keys import AGENT_DEFAULT_MODEL
from pydsh.apps.web.auth import CookieSigner, SignInToken, load_secret, web_dir
from pydsh.apps.web.errors import ApiError, not_found
from pydsh.apps.web.files import read_json, write_json
from pydsh.apps.web.limits import Limits
from pydsh.apps.web.providers import Providers, escaped
from pydsh.apps.web.summary import workspace_id
from pydsh.contract.tools import TOOLS
from pydsh.kernel.context import Context
from pydsh.mcp_resources.keys import MCP_RESOURCES
from pydsh.policy.keys import PERMISSIONS
from pydsh.session.keys import SESSION_PERSISTENCE
from pydsh.teams.keys import AGENT_TEAMS

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from pydsh.apps.web.hub import WebHub

log = logging.getLogger("pydsh.web")

STATIC = Path(__file__).resolve().parent / "static"
PERMISSION_PRESETS = ("read-only", "workspace-write", "danger-full-access")
SETTINGS: dict[str, tuple[Any, Any]] = {
    # key: (default, allowed values or a type)
    "general.defaultPermissionPreset": (None, (None, *PERMISSION_PRESETS)),
    "general.sendWhileBusy": ("queue", ("queue", "steer")),
    "general.enterSends": (True, bool),
    "general.collapseWorkDetails": (True, bool),
    "general.detailLevel": ("normal", ("compact", "normal", "verbose")),
    "appearance.theme": ("system", ("light", "dark", "system")),
    "appearance.fontSize": (15, int),
    "models.defaultProvider": (None, (str, type(None))),
    "models.defaultModel": (None, (str, type(None))),
    "models.defaultEffort": (None, (str, type(None))),
    "agentMessage.showMode": (False, bool),
    "agentMessage.showTargetStatus": (False, bool),
}
SERVER_COMMANDS = {
    "compact": "Compact the conversation now",
    "schedule": "List this session's reminders; /schedule delete ID cancels one",
}
"""Prompts a composed plugin runs as a command instead of sending them to the model (spec 10 §4.8)."""
CLIENT_ERRORS_PER_MINUTE = 20
ESCAPED = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]")


class PanelConfig(BaseModel):
    """An optional panel: a client module URL and an optional server part ``module:function``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    url: str
    server: str | None = None


class Config(BaseModel):
    """``web-app`` row config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    panels: list[PanelConfig] = []
    limits: Limits = Limits()


class SettingsPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expectedRevision: int
    set: dict[str, Any]


@dataclass
class Panel:
    id: str
    url: str
    status: str = "ready"
    reason: str | None = None
    routes: list[BaseRoute] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "url": self.url, "status": self.status}
        if self.reason:
            out["reason"] = self.reason
        return out


class WebState:
    """What one server start knows besides the hub."""

    def __init__(
        self,
        ctx: Context,
        *,
        home: Path,
        port: int,
        token: str,
        first_workspace: str,
        profile: str,
        config: Config,
        static_dir: Path = STATIC,
    ) -> None:
        self.ctx = ctx
        self.home = home
        self.dir = web_dir(home)
        self.sign_in = SignInToken(token)
        self.signer = CookieSigner(load_secret(home), port)
        self.first_workspace = first_workspace
        self.profile = profile
        self.providers = Providers(ctx, home, profile)
        self.static_dir = static_dir.resolve()
        self._client_errors: list[float] = []
        self._panels = self._load_panels(config)

    # -- auth and page --------------------------------------------------------------------------

    def static_file(self, name: str) -> Path | None:
        """A file inside the static folder (no traversal, no hidden files), else ``None``."""
        if not name or any(part.startswith(".") for part in name.split("/")):
            return None
        path = (self.static_dir / name).resolve()
        if not path.is_relative_to(self.static_dir) or not path.is_file():
            return None
        return path

    def index_html(self) -> str | None:
        """``index.html`` with ``{{version}}`` replaced, so static URLs carry the version (P3)."""
        path = self.static_file("index.html")
        if path is None:
            return None
        preload = "\n".join(
            f'<link rel="modulepreload" href="/static/v{{{{version}}}}/{name}">'
            for name in static_imports(self.static_dir)
        )
        html = path.read_text(encoding="utf-8").replace("{{preload}}", preload)
        return html.replace("{{version}}", __version__)

    # -- info and panels ------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        permissions = self.ctx.get(PERMISSIONS)
        values = self.settings()["values"]
        default_model = self.ctx.get(AGENT_DEFAULT_MODEL)
        route = dict(default_model.current_selection()) if default_model is not None else {}
        defaults: dict[str, Any] = {
            "permissionPreset": values["general.defaultPermissionPreset"]
            or (permissions.default_preset if permissions is not None else "workspace-write"),
            "provider": values["models.defaultProvider"] or route.get("provider", ""),
            "model": values["models.defaultModel"] or route.get("model", ""),
        }
        if values["models.defaultEffort"]:
            defaults["effort"] = values["models.defaultEffort"]
        return {
            "version": __version__,
            "profile": self.profile,
            "dshHome": str(self.home),
            "defaults": defaults,
            "features": {
                "teams": self.teams_composed(),
                "agentMessage": self.agent_message_composed(),
                "directoryBrowser": True,
            },
            "unavailablePlugins": self.unavailable_plugins(),
            "commands": self.commands(),
        }

    def commands(self) -> list[dict[str, str]]:
        """The ``/`` commands a prompt may be (F29): those whose pre-step listener is composed (``command-compact``),
        then the MCP prompts."""
        names = {listener.name for listener in self.ctx.runtime.bus.listeners(PRE_STEP)}
        own = [
            {"name": name, "description": text} for name, text in SERVER_COMMANDS.items() if f"command-{name}" in names
        ]
        return own + self.prompt_commands()

    def prompt_commands(self) -> list[dict[str, str]]:
        """The MCP prompts of the composition's servers, run as ``/mcp__server__prompt`` (``mcp-prompt-commands``)."""
        service = self.ctx.get(MCP_RESOURCES)
        return (
            [] if service is None else [{"name": c.name, "description": c.description} for c in service.commands(None)]
        )

    def unavailable_plugins(self) -> list[dict[str, str]]:
        """Rows of the composition that failed to load, for Settings → About (D4)."""
        loader = self.ctx.runtime.loader
        return [
            {"id": f.row_id, "plugin": f.plugin_name, "reason": _first_line(f.error)}
            for f in loader.failures
            if f.error is not None
        ]

    def teams_composed(self) -> bool:
        return self.ctx.get(AGENT_TEAMS) is not None

    def agent_message_composed(self) -> bool:
        """Whether the ``agent-message`` plugin (09) registered its global ``send_agent_message`` tool."""
        tools = self.ctx.get(TOOLS)
        return tools is not None and tools.lookup(None, "send_agent_message") is not None

    def _load_panels(self, config: Config) -> list[Panel]:
        """Built-in optional panels when their feature is composed, then configured ones (D2)."""
        version = f"/static/v{__version__}"
        panels: list[Panel] = []
        if self.teams_composed():
            panels.append(Panel("team", f"{version}/team.js"))
        if self.agent_message_composed():
            panels.append(Panel("messages", f"{version}/messages.js"))
        for spec in config.panels:
            panels.append(self._mount(spec))
        return panels

    def _mount(self, spec: PanelConfig) -> Panel:
        panel = Panel(spec.id, spec.url)
        if spec.server is None:
            return panel
        module_name, _, attr = spec.server.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr or "routes")
            routes = list(factory(self.ctx))
        except Exception as exc:
            log.warning("web panel %s is unavailable", spec.id, exc_info=True)
            panel.status = "unavailable"
            panel.reason = _one_line(exc)
            return panel
        from starlette.routing import Mount

        panel.routes = [Mount(f"/api/panels/{spec.id}", routes=routes)]
        return panel

    def panels(self) -> list[dict[str, Any]]:
        return [p.view() for p in self._panels]

    def panel_routes(self) -> list[BaseRoute]:
        return [route for p in self._panels for route in p.routes]

    # -- workspaces -----------------------------------------------------------------------------

    @property
    def _workspaces_file(self) -> Path:
        return self.dir / "known-workspaces.json"

    def _known(self) -> dict[str, list[str]]:
        raw = read_json(self._workspaces_file, {})
        added = [p for p in raw.get("added", []) if isinstance(p, str)] if isinstance(raw, dict) else []
        hidden = [p for p in raw.get("hidden", []) if isinstance(p, str)] if isinstance(raw, dict) else []
        return {"added": added, "hidden": hidden}

    def expand(self, path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    def workspaces(self, counts: dict[str, int]) -> list[dict[str, Any]]:
        """``--cwd`` first, then session folders (``counts``: root sessions per folder, newest first), then
        added ones; removed ones hidden."""
        known = self._known()
        paths = [self.first_workspace, *counts, *known["added"]]
        hidden = set(known["hidden"]) - {self.first_workspace}
        return [_workspace(p, counts.get(p, 0)) for p in dict.fromkeys(paths) if p and p not in hidden]

    def add_workspace(self, raw: str) -> dict[str, Any]:
        path = self.expand(raw)
        if not os.path.isdir(path):
            raise ApiError(422, "not_a_directory", f"{raw} is not an existing directory.")
        known = self._known()
        if path not in known["added"]:
            known["added"].append(path)
        known["hidden"] = [p for p in known["hidden"] if p != path]
        write_json(self._workspaces_file, known)
        return _workspace(path, 0)

    def remove_workspace(self, wid: str, counts: dict[str, int]) -> None:
        """Forget a workspace (files untouched): drop it from the added list and hide its sessions' folder."""
        known = self._known()
        listed = {w["workspaceId"]: w["path"] for w in self.workspaces(counts)}
        path = listed.get(wid)
        if path is None:
            raise not_found("That workspace")
        known["added"] = [p for p in known["added"] if p != path]
        if path not in known["hidden"]:
            known["hidden"].append(path)
        write_json(self._workspaces_file, known)

    # -- settings -------------------------------------------------------------------------------

    @property
    def _settings_file(self) -> Path:
        return self.dir / "settings.json"

    def settings(self) -> dict[str, Any]:
        raw = read_json(self._settings_file, {})
        stored = raw.get("values", {}) if isinstance(raw, dict) else {}
        values = {key: default for key, (default, _) in SETTINGS.items()}
        for key, value in stored.items():
            if key in SETTINGS and _allowed(key, value):
                values[key] = value
        revision = raw.get("revision", 0) if isinstance(raw, dict) else 0
        return {"revision": revision if isinstance(revision, int) else 0, "values": values}

    def patch_settings(self, expected: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` if ``expected`` is the current revision (409 otherwise; 422 for a bad key)."""
        current = self.settings()
        if expected != current["revision"]:
            raise ApiError(409, "stale_revision", "Settings changed meanwhile; reload them and try again.")
        for key, value in changes.items():
            if key not in SETTINGS:
                raise ApiError(422, "unknown_setting", f'Unknown setting "{key}".')
            if not _allowed(key, value):
                raise ApiError(422, "invalid_setting", f'Setting "{key}" cannot be {json.dumps(value)}.')
        values = {**current["values"], **changes}
        out = {"revision": current["revision"] + 1, "values": values}
        write_json(self._settings_file, out)
        if {"models.defaultProvider", "models.defaultModel"} & set(changes) and values["models.defaultModel"]:
            route = {"provider": values["models.defaultProvider"], "model": values["models.defaultModel"]}
            self.providers.patch_row("agent-default-model", lambda config: {**config, **escaped(route)})
        return out

    async def models(self) -> dict[str, Any]:
        """``GET /api/models``: the routes, their models and efforts, and the defaults (F26, F41).

        The defaults name the effort a new session will run: the chosen default effort, else the
        default model's own default (the one the model service fills in), so the page never shows
        another.
        """
        providers = await self.providers.listed()
        defaults = self.info()["defaults"]
        if "effort" not in defaults:
            effort = _default_effort(providers, defaults)
            if effort is not None:
                defaults["effort"] = effort
        return {"providers": providers, "defaults": defaults}

    def new_session_defaults(self) -> tuple[str | None, dict[str, Any] | None]:
        """The permission preset and route a new session starts with when the page sends none (F9)."""
        values = self.settings()["values"]
        model = None
        if values["models.defaultProvider"] and values["models.defaultModel"]:
            model = {"provider": values["models.defaultProvider"], "model": values["models.defaultModel"]}
            if values["models.defaultEffort"]:
                model["effort"] = values["models.defaultEffort"]
        return values["general.defaultPermissionPreset"], model

    # -- logs and client errors -----------------------------------------------------------------

    async def log_bytes(self, hub: WebHub, session_id: str) -> bytes:
        """The stored log, decompressed; a session never stored is serialised from memory."""
        live = hub.store.get(session_id)
        if live is not None:
            await hub.store.flush(live)
        persistence = self.ctx.get(SESSION_PERSISTENCE)
        find = getattr(persistence, "find", None)
        directory = await _thread(find, session_id) if find is not None else None
        if directory is not None:
            data: bytes | None = await _thread(_read_log, directory)
            if data is not None:
                return data
        session = await hub.views.read(session_id)
        lines = [json.dumps(session.header, ensure_ascii=False)]
        lines += [json.dumps(e, ensure_ascii=False) for e in session.events]
        return ("\n".join(lines) + "\n").encode()

    async def tree_zip(self, hub: WebHub, root_id: str) -> bytes:
        """A ZIP of the session's log and every descendant's (F40)."""
        from pydsh.apps.web.agents import agent_tree

        tree = await agent_tree(hub, root_id)
        ids: list[str] = []
        stack = [tree]
        while stack:
            node = stack.pop()
            ids.append(node["sessionId"])
            stack.extend(node.get("children", []))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for sid in ids:
                try:
                    archive.writestr(f"{sid}.session.v4.jsonl", await self.log_bytes(hub, sid))
                except ApiError:
                    continue
        return buffer.getvalue()

    def client_error(self, message: str, stack: str | None) -> None:
        """Log a page error as one line (at most 20 a minute; more are counted out silently).

        Control characters, line breaks included, are escaped, so a page cannot forge log lines.
        """
        now = time.monotonic()
        self._client_errors = [t for t in self._client_errors if now - t < 60]
        if len(self._client_errors) >= CLIENT_ERRORS_PER_MINUTE:
            return
        self._client_errors.append(now)
        where = f" | stack: {_escape(stack[:4000])}" if stack else ""
        log.warning("page error: %s%s", _escape(message[:500]), where)


STATIC_IMPORT = re.compile(r'^\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.{1,2}/[^"]+\.js)"', re.MULTILINE)


def static_imports(static_dir: Path, entry: str = "app.js") -> list[str]:
    """The modules ``entry`` imports statically, directly or not (paths under ``static_dir``): the page names them
    all at once as ``modulepreload`` links, so the browser fetches them side by side instead of one import level
    after another (about 200 ms of a session's first paint). Modules loaded with ``import()`` are left out."""
    found: list[str] = []
    todo = [entry]
    while todo:
        name = todo.pop()
        path = static_dir / name
        if name in found or not path.is_file():
            continue
        found.append(name)
        base = Path(name).parent
        for target in STATIC_IMPORT.findall(path.read_text(encoding="utf-8")):
            todo.append(os.path.normpath(base / target))
    return sorted(found[1:])


def _escape(text: str) -> str:
    """``text`` with backslashes doubled and control characters and line separators escaped (``\\n``, ``\\x1b``)."""
    return ESCAPED.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _workspace(path: str, count: int) -> dict[str, Any]:
    return {
        "workspaceId": workspace_id(path),
        "path": path,
        "name": os.path.basename(path.rstrip("/")) or path,
        "sessionCount": count,
    }


def _default_effort(providers: list[dict[str, Any]], route: dict[str, Any]) -> str | None:
    """The default effort of ``route``'s model in the listed ``providers``, if it declares one."""
    for provider in providers:
        if provider["id"] != route.get("provider"):
            continue
        for model in provider["models"]:
            if model["id"] == route.get("model") and isinstance(model.get("defaultEffort"), str):
                return str(model["defaultEffort"])
    return None


def _allowed(key: str, value: Any) -> bool:
    _default, rule = SETTINGS[key]
    if rule is bool:
        return isinstance(value, bool)
    if rule is int:
        return isinstance(value, int) and not isinstance(value, bool) and 10 <= value <= 24
    if isinstance(rule, tuple) and all(isinstance(r, type) for r in rule):
        return isinstance(value, rule)
    return value in rule


def _one_line(exc: BaseException) -> str:
    """The user-facing reason: one sentence, no path or stack (those go to the server log, D4)."""
    return f"its server part failed to load ({type(exc).__name__})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _read_log(directory: Path) -> bytes | None:
    plain, packed = directory / "session.v4.jsonl", directory / "session.v4.jsonl.zstd"
    if plain.is_file():
        return plain.read_bytes()
    if packed.is_file():
        import zstandard

        with packed.open("rb") as fh:
            reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True)
            return bytes(reader.read())
    return None


async def _thread(fn: Any, *args: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(fn, *args)
