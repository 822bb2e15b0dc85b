"""Running a composed profile: load the rows, run the ``app`` service, tear everything down."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Mapping
from typing import Protocol

from pydsh.kernel.compose import Row
from pydsh.kernel.host import Kernel


class App(Protocol):
    """What an app bundle's row provides as the ``app`` service."""

    async def run(self, args: list[str]) -> int: ...


def configure_logging() -> None:
    """Every log line goes to stderr (stdout may carry a wire protocol)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pydsh: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)


async def boot(rows: list[Row], profile: str | None = None, services: Mapping[str, object] | None = None) -> Kernel:
    """Load ``rows``; ``host_info`` tells plugins which profile they run in, ``services`` are provided first."""
    kernel = Kernel()
    if profile is not None:
        from pydsh.kernel.profiles import profile_dir

        kernel.ctx.provide("host_info", {"profile": profile, "profile_dir": str(profile_dir(profile))})
    for name, service in (services or {}).items():
        kernel.ctx.provide(name, service)
    await kernel.load(rows)
    return kernel


def strict_config_errors(kernel: Kernel) -> list[str]:
    """Invalid config of rows from shipped bundles or the user's patches: composition errors, each once."""
    from pydsh.kernel.profiles import PLUGIN_BUNDLE

    errors = (
        str(f.error)
        for f in kernel.loader.failures
        if getattr(f.error, "code", None) == "CONFIG_INVALID" and not f.source.startswith(PLUGIN_BUNDLE)
    )
    return list(dict.fromkeys(errors))


async def serve(profile: str, rows: list[Row], args: list[str]) -> int:
    kernel = await boot(rows, profile)
    try:
        errors = strict_config_errors(kernel)
        if errors:
            for error in errors:
                print(f"pydsh: {error}", file=sys.stderr)
            return 2
        app: App | None = kernel.ctx.get("app")
        if app is None:
            failures = kernel.loader.failures
            failed = ", ".join(f.row_id for f in failures) or "none"
            print(f'pydsh: profile "{profile}" provides no app service (failed rows: {failed})', file=sys.stderr)
            return 1
        return await app.run(args)
    finally:
        await kernel.dispose()


def run_app(profile: str, rows: list[Row], args: list[str]) -> int:
    configure_logging()
    return asyncio.run(serve(profile, rows, args))
