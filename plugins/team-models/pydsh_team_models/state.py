"""The team-models state file: routes per Team, written atomically, quarantined when corrupt (spec 08 §B.4).

State is keyed by Team id (the Lead's Session id) and member name, so two Teams with a same-named
teammate never share an override. The in-memory state is swapped only after the new file is in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh.agent import Route

log = logging.getLogger("pydsh_team_models")
VERSION = 1
ROUTE_KEYS = {"provider", "model", "reasoningEffort"}


@dataclass
class TeamEntry:
    """One Team's routes: ``default`` is meaningful only when ``has_default`` (``None`` = explicitly cleared)."""

    overrides: dict[str, Route] = field(default_factory=dict)
    has_default: bool = False
    default: Route | None = None

    def copy(self) -> TeamEntry:
        return TeamEntry(dict(self.overrides), self.has_default, self.default)


def route_json(route: Route) -> dict[str, str]:
    """A route as results and the file show it: ``{provider, model, reasoningEffort?}``."""
    out = {"provider": route.provider, "model": route.model}
    if route.reasoning_effort is not None:
        out["reasoningEffort"] = route.reasoning_effort
    return out


def route_problem(value: object) -> str | None:
    """What is wrong with a stored route object, or ``None``."""
    if not isinstance(value, dict):
        return "is not an object"
    extra = set(value) - ROUTE_KEYS
    if extra:
        return f"has unknown keys {sorted(extra)}"
    for key in ("provider", "model"):
        if not isinstance(value.get(key), str) or not value[key].strip():
            return f"{key} must be a non-empty string"
    if "reasoningEffort" in value and (
        not isinstance(value["reasoningEffort"], str) or not value["reasoningEffort"].strip()
    ):
        return "reasoningEffort must be a non-empty string"
    return None


def route_of(value: dict[str, Any]) -> Route:
    return Route(value["provider"], value["model"], value.get("reasoningEffort"))


def encode(teams: dict[str, TeamEntry]) -> str:
    body: dict[str, Any] = {}
    for team_id, entry in teams.items():
        team: dict[str, Any] = {}
        if entry.has_default:
            team["default"] = route_json(entry.default) if entry.default is not None else None
        team["overrides"] = {name: route_json(route) for name, route in entry.overrides.items()}
        body[team_id] = team
    return json.dumps({"version": VERSION, "teams": body}, indent=2, ensure_ascii=False) + "\n"


def decode(raw: dict[str, Any], *, warn: bool = True) -> dict[str, TeamEntry]:
    """The valid entries of a well-formed file; each invalid entry is dropped (with a warning naming it)."""
    report = log.warning if warn else log.debug
    teams: dict[str, TeamEntry] = {}
    for team_id, team in raw["teams"].items():
        if not team_id.strip() or not isinstance(team, dict):
            report("team-models: dropped team %r: not a non-empty team id with an object", team_id)
            continue
        entry = TeamEntry()
        if "default" in team:
            problem = None if team["default"] is None else route_problem(team["default"])
            if problem is None:
                entry.has_default = True
                entry.default = None if team["default"] is None else route_of(team["default"])
            else:
                report("team-models: dropped team %s default: route %s", team_id, problem)
        overrides = team.get("overrides", {})
        if not isinstance(overrides, dict):
            report("team-models: dropped team %s overrides: not an object", team_id)
            overrides = {}
        for name, route in overrides.items():
            problem = route_problem(route)
            if problem is None:
                entry.overrides[name] = route_of(route)
            else:
                report("team-models: dropped team %s member %s override: route %s", team_id, name, problem)
        teams[team_id] = entry
    return teams


class StorageError(Exception):
    """The state could not be saved; memory is unchanged."""


class StateStore:
    """The state file and its in-memory copy; mutations go through :meth:`commit`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.teams: dict[str, TeamEntry] = {}
        self.lock = asyncio.Lock()

    def load(self) -> None:
        """Read the file: missing → empty; unparsable or wrong top level → quarantined, one warning, empty."""
        self._remove_stale_temps()
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        try:
            raw = json.loads(text)
        except ValueError:
            raw = None
        if not (isinstance(raw, dict) and raw.get("version") == VERSION and isinstance(raw.get("teams"), dict)):
            self._quarantine()
            return
        self.teams = decode(raw)

    def _quarantine(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{secrets.token_hex(4)}")
        os.replace(self.path, target)
        log.warning("team-models: state file is corrupt; moved it to %s and started empty", target)

    def _remove_stale_temps(self) -> None:
        if self.path.parent.is_dir():
            for stale in self.path.parent.glob(f"{self.path.name}.tmp-*"):
                with contextlib.suppress(OSError):
                    stale.unlink()

    def team(self, team_id: str) -> TeamEntry:
        return self.teams.get(team_id) or TeamEntry()

    async def commit(self, team_id: str, entry: TeamEntry) -> None:
        """Write the state with ``entry`` for ``team_id``, then swap it in (``StorageError`` leaves memory as is)."""
        async with self.lock:
            try:
                self.teams = self._write(team_id, entry)
            except OSError as exc:
                raise StorageError(str(exc)) from exc

    def _on_disk(self) -> dict[str, TeamEntry]:
        """The Teams another process sharing the file may have written since we loaded (ours if unreadable)."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return self.teams
        if isinstance(raw, dict) and raw.get("version") == VERSION and isinstance(raw.get("teams"), dict):
            return decode(raw, warn=False)
        return self.teams

    def _write(self, team_id: str, entry: TeamEntry) -> dict[str, TeamEntry]:
        """Under the file lock: merge ``entry`` into the Teams on disk, replace the file, return the new state."""
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = directory / f"{self.path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        with open(directory / f"{self.path.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            new = {**self._on_disk(), team_id: entry}
            text = encode(new)
            try:
                with open(temp, "w", encoding="utf-8") as out:
                    out.write(text)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temp.unlink()
                raise
        self._sync_directory(directory)
        return new

    @staticmethod
    def _sync_directory(directory: Path) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
