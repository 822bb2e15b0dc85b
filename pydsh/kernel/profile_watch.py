"""``profile-watch``: a plugin added to the running profile loads at once when every plugin of it allows it.

``pydsh plugin --profile NAME add …`` appends a distribution's bundle to ``profile.yml``. A long-running
process of that profile (``pydsh web`` mounts this row) notices the change by polling the file's
identity, composes the profile again as start-up did (its ``--patch`` files aside), and takes the
top-level rows each newly listed bundle brought. When every plugin they name declares
``hot_load = True`` they are added below the root and activate like any row; otherwise one warning
says the bundle takes effect at the next start. Bundles dropped from the list keep their rows
until the next start (unloading a plugin whose tools are in use is not attempted). Patch files are
not reloaded (spec 01 §11.9).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import site
import sys
from pathlib import Path

from pydsh.kernel.compose import Row, resolve_rows, walk
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.kernel.errors import KernelError
from pydsh.kernel.keys import HOST_INFO
from pydsh.kernel.profiles import PLUGIN_BUNDLE, ProfileError, compose_profile, read_profile

name = "profile-watch"
inject = (HOST_INFO,)
log = logging.getLogger("pydsh.kernel.profile_watch")


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    intervalMs: int = Field(default=1000, ge=10)
    """How often ``profile.yml`` is checked (one ``stat``)."""


def identity(path: Path) -> tuple[int, int, int] | None:
    """What changes when ``profile.yml`` is rewritten (``pydsh plugin`` replaces it atomically)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def listed_bundles(directory: Path) -> list[str]:
    """The bundles ``profile.yml`` lists now ([] while it cannot be read)."""
    try:
        return list(read_profile(directory)["bundles"])
    except KernelError:
        return []


def see_new_installs() -> None:
    """Let this process find distributions installed since it started: their metadata, ``.pth`` paths
    and ``pydsh.plugins`` entry points."""
    from pydsh.kernel import plugin

    for directory in site.getsitepackages():
        if directory in sys.path:
            site.addsitedir(directory)
    importlib.invalidate_caches()
    plugin.forget_entry_points()


def bundle_rows(rows: list[Row], bundle: str) -> list[Row]:
    """The top-level rows ``bundle`` inserted (rows a user patch changed since keep their source)."""
    return [row for row in rows if row.source.startswith(f"{PLUGIN_BUNDLE} {bundle} (")]


def not_hot(rows: list[Row]) -> str:
    """The first plugin of ``rows`` that may not load into a running process, with why ("" when all may)."""
    from pydsh.kernel.plugin import resolve_plugin

    for _holder, row in walk(rows):
        if row.is_group or row.disabled is True:
            continue
        try:
            info = resolve_plugin(row.name)
        except KernelError as exc:
            return f"plugin {row.name} cannot be loaded ({exc.detail})"
        if not info.hot_load:
            return f"plugin {row.name} does not declare that it can load into a running process"
    return ""


class ProfileWatch:
    """Polls one profile's ``profile.yml`` and loads the rows of bundles added to it."""

    def __init__(self, ctx: Context, config: Config) -> None:
        info = ctx.require(HOST_INFO)
        self.ctx = ctx
        self.profile = str(info["profile"])
        self.directory = Path(info["profile_dir"])
        self.interval = config.intervalMs / 1000
        self.seen = identity(self.directory / "profile.yml")
        self.bundles = set(listed_bundles(self.directory))

    def root(self) -> Context:
        """The root context, below which the composition's top-level rows live."""
        fiber = self.ctx.fiber
        while fiber.parent is not None:
            fiber = fiber.parent
        assert fiber.ctx is not None
        return fiber.ctx

    async def run(self) -> None:
        """Check ``profile.yml`` every interval until unloaded."""
        while True:
            await asyncio.sleep(self.interval)
            now = identity(self.directory / "profile.yml")
            if now != self.seen:
                self.seen = now
                await self.changed()

    async def changed(self) -> None:
        """Load the bundles ``profile.yml`` lists now and did not before; note the ones it dropped."""
        listed = listed_bundles(self.directory)
        added = [b for b in listed if b not in self.bundles]
        for bundle in sorted(self.bundles - set(listed)):
            log.warning(
                'bundle "%s" was removed from profile "%s"; its rows stay loaded until the next start',
                bundle,
                self.profile,
            )
        self.bundles = set(listed)
        if added:
            see_new_installs()
            await self.load(added)

    async def load(self, added: list[str]) -> None:
        """Compose the profile as it is now and add the rows of each ``added`` bundle that may load live."""
        try:
            comp = await asyncio.to_thread(compose_profile, self.profile, [])
        except (KernelError, ProfileError) as exc:
            log.warning('profile "%s" changed but does not compose (%s); nothing was loaded', self.profile, exc)
            return
        for warning in comp.warnings:
            log.warning("%s", warning)
        loader = self.ctx.runtime.loader
        for bundle in added:
            rows = bundle_rows(comp.rows, bundle)
            if not rows:
                continue
            why = not_hot(rows)
            if why:
                log.warning(
                    'bundle "%s" was added to profile "%s"; it takes effect at the next start: %s',
                    bundle,
                    self.profile,
                    why,
                )
                continue
            try:
                resolved = resolve_rows(rows)
            except KernelError as exc:
                log.warning(
                    'bundle "%s" was added to profile "%s" but cannot load: %s', bundle, self.profile, exc.detail
                )
                continue
            loader.add_rows(self.root(), resolved)
            await loader.settle()
            ids = {row.id for _holder, row in walk(rows)}
            failed = sorted(f.row_id for f in loader.failures if f.row_id in ids)
            outcome = f"its rows {', '.join(failed)} failed (see above)" if failed else "loaded without a restart"
            log.warning('bundle "%s" was added to profile "%s": %s', bundle, self.profile, outcome)


async def apply(ctx: Context, config: Config) -> None:
    """Start polling; the task ends when the row unloads."""
    watch = ProfileWatch(ctx, config)
    task = asyncio.get_running_loop().create_task(watch.run(), name=f"profile-watch {watch.profile}")

    async def stop() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    ctx.register(stop)
