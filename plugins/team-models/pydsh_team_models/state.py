"""The team-models state file: routes per Team, written atomically, quarantined when corrupt (spec 08 §B.4).

State is keyed by Team id (the Lead's Session id) and member name, so two Teams with a same-named
teammate never share an override. The in-memory state is swapped only after the new file is in place.
A file that cannot be read is never replaced, and a Team with nothing stored is left out of the file.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydsh.plugin import PydshError, Route

log = logging.getLogger("pydsh_team_models")
VERSION = 1
ROUTE_KEYS = {"provider", "model", "reasoningEffort"}
WARNING_LIMIT = 10
"""Problems of one kind named one by one at start; the rest are counted in one more line."""
ENCODER = json.JSONEncoder(ensure_ascii=False)


@dataclass
class TeamEntry:
    """One Team's routes: ``default`` is meaningful only when ``has_default`` (``None`` = explicitly cleared)."""

    overrides: dict[str, Route] = field(default_factory=dict)
    has_default: bool = False
    default: Route | None = None

    def copy(self) -> TeamEntry:
        return TeamEntry(dict(self.overrides), self.has_default, self.default)

    @property
    def empty(self) -> bool:
        """Nothing stored: the same as no entry at all (no override, no default set or cleared)."""
        return not self.overrides and not self.has_default


class Reports:
    """Logs the first :data:`WARNING_LIMIT` problems one by one, then only counts them: a large bad file stays brief."""

    def __init__(self, report: Callable[..., None]) -> None:
        self.report = report
        self.count = 0

    def __call__(self, message: str, *args: object) -> None:
        self.count += 1
        if self.count <= WARNING_LIMIT:
            self.report(message, *args)

    def close(self, what: str) -> None:
        """One line for the problems not named (``what`` says what they were)."""
        if self.count > WARNING_LIMIT:
            self.report("team-models: %d more %s", self.count - WARNING_LIMIT, what)


def os_problem(exc: OSError) -> str:
    """An OS error as ``<file name>: <reason>``: no directories, since tool results reach the model."""
    if exc.strerror and isinstance(exc.filename, str):
        return f"{Path(exc.filename).name}: {exc.strerror}"
    return str(exc)


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


class Routes:
    """Builds the routes of one read of the file, equal ones as one shared (frozen) ``Route``.

    Many Teams store the same few routes; sharing them keeps a large file's start time and memory down.
    """

    def __init__(self) -> None:
        self.known: dict[tuple[str, str, str | None], Route] = {}

    def __call__(self, value: dict[str, Any]) -> Route:
        key = (value["provider"], value["model"], value.get("reasoningEffort"))
        route = self.known.get(key)
        if route is None:
            route = self.known[key] = Route(*key)
        return route


def team_json(entry: TeamEntry) -> dict[str, Any]:
    """One Team as the file stores it: ``{default?, overrides}``."""
    team: dict[str, Any] = {}
    if entry.has_default:
        team["default"] = route_json(entry.default) if entry.default is not None else None
    team["overrides"] = {name: route_json(route) for name, route in entry.overrides.items()}
    return team


def encode(teams: dict[str, TeamEntry]) -> str:
    """The file's text: one line per Team, readable and written by the C encoder however many Teams there are."""
    lines = [f"    {ENCODER.encode(team_id)}: {ENCODER.encode(team_json(entry))}" for team_id, entry in teams.items()]
    body = "{\n" + ",\n".join(lines) + "\n  }" if lines else "{}"
    return f'{{\n  "version": {VERSION},\n  "teams": {body}\n}}\n'


def parse(data: bytes) -> dict[str, Any] | None:
    """The file's content when it is UTF-8 JSON of the form ``{version: 1, teams: {…}}``, else ``None``."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    well_formed = isinstance(raw, dict) and raw.get("version") == VERSION and isinstance(raw.get("teams"), dict)
    return raw if well_formed else None


def decode(raw: dict[str, Any], *, warn: bool = True) -> dict[str, TeamEntry]:
    """The valid entries of a well-formed file; invalid entries are dropped, the first ones named in a warning."""
    report = Reports(log.warning if warn else log.debug)
    route_of = Routes()
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
    report.close("invalid entries of the state file were dropped without a warning each")
    return teams


class StorageError(PydshError):
    """The state could not be saved; memory is unchanged."""


class StateStore:
    """The state file and its in-memory copy; changes go through :meth:`commit` and :meth:`prune`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.teams: dict[str, TeamEntry] = {}
        self.lock = asyncio.Lock()
        self.seen: tuple[int, int, int, int] | None = None
        """Identity of the file as last read or written: while it holds, memory is what the file says."""

    def load(self) -> None:
        """Read the file: missing or unreadable → empty (one warning, the file left alone); not ours → quarantined."""
        self._remove_stale_temps()
        try:
            data, seen = self._read()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning(
                "team-models: cannot read the state file %s (%s); starting empty and leaving it as it is",
                self.path,
                exc.strerror or exc,
            )
            return
        raw = parse(data)
        if raw is None:
            self._set_aside()
            return
        self.teams, self.seen = decode(raw), seen

    def _read(self) -> tuple[bytes, tuple[int, int, int, int]]:
        """The file's bytes and identity (device, inode, size, mtime), both from the one open file."""
        with open(self.path, "rb") as handle:
            info = os.fstat(handle.fileno())
            return handle.read(), (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def _unchanged(self) -> bool:
        """Whether the file is still the one last read or written (every write renames a new file into place)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return self.seen == (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def _set_aside(self) -> None:
        """Quarantine a corrupt file at start; one that cannot be moved stays where it is (and is never replaced)."""
        try:
            self._quarantine()
        except OSError as exc:
            log.warning(
                "team-models: the state file is corrupt and could not be moved aside (%s); starting empty and "
                "leaving it as it is",
                os_problem(exc),
            )

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

        def put(teams: dict[str, TeamEntry]) -> dict[str, TeamEntry]:
            new = {**teams, team_id: entry}
            if entry.empty:
                del new[team_id]
            return new

        await self._change(put)

    async def prune(self, gone: set[str]) -> int:
        """Remove the Teams ``gone`` from the file and memory (Teams written since stay); how many were stored."""
        removed = 0

        def drop(teams: dict[str, TeamEntry]) -> dict[str, TeamEntry]:
            nonlocal removed
            kept = {team_id: entry for team_id, entry in teams.items() if team_id not in gone}
            removed = len(teams) - len(kept)
            return kept

        await self._change(drop)
        return removed

    async def _change(self, change: Callable[[dict[str, TeamEntry]], dict[str, TeamEntry]]) -> None:
        """Apply ``change`` to the file in a worker thread (a large file never stalls the loop), then to memory."""
        async with self.lock:
            try:
                self.teams, self.seen = await asyncio.to_thread(self._write, change)
            except OSError as exc:
                raise StorageError(os_problem(exc)) from exc

    def _on_disk(self) -> dict[str, TeamEntry]:
        """The Teams in the file now (another process may have written some; ours if it is gone).

        A file that cannot be read is never replaced (``StorageError``); a corrupt one is quarantined first.
        """
        if self._unchanged():
            return self.teams
        try:
            data, _seen = self._read()
        except FileNotFoundError:
            return self.teams
        except OSError as exc:
            raise StorageError(f"{self.path.name} cannot be read ({exc.strerror or exc}); it is left as it is") from exc
        raw = parse(data)
        if raw is None:
            self._quarantine()
            return self.teams
        return decode(raw, warn=False)

    def _write(
        self, change: Callable[[dict[str, TeamEntry]], dict[str, TeamEntry]]
    ) -> tuple[dict[str, TeamEntry], tuple[int, int, int, int]]:
        """Under the file lock: apply ``change`` to the Teams on disk, replace the file; the new state and file."""
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        temp = directory / f"{self.path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        with open(directory / f"{self.path.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            new = change(self._on_disk())
            text = encode(new)
            try:
                with open(temp, "w", encoding="utf-8") as out:
                    out.write(text)
                    out.flush()
                    os.fsync(out.fileno())
                    info = os.fstat(out.fileno())
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temp.unlink()
                raise
        self._sync_directory(directory)
        return new, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    @staticmethod
    def _sync_directory(directory: Path) -> None:
        with contextlib.suppress(OSError):
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
