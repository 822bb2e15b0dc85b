"""``pydsh batch TASKS``: run many agent tasks, each in its own session, workspace and ``DSH_HOME`` shard.

Exit codes: 0 when every task passed, 1 when some did not, 2 for a usage error or a batch that cannot
start (its one line on stderr), 130 when Ctrl-C stopped it (rerun the same command to finish).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import NoReturn

from pydsh.batch.errors import BatchError
from pydsh.batch.runner import Backend, Batch, Options, read_prices
from pydsh.batch.workspace import SANDBOX_MODES

USAGE = (
    "pydsh batch TASKS.jsonl|DIR [--out DIR] [--workers N] [--ray auto|ADDRESS] [--profile NAME] [--patch FILE]..."
    " [--timeout S] [--command-timeout S] [--sandbox auto|off|required] [--prices FILE]"
)
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class Parser(argparse.ArgumentParser):
    """argparse that raises ``BatchError`` instead of printing and exiting."""

    def error(self, message: str) -> NoReturn:
        raise BatchError(message)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = Parser(prog="pydsh batch", usage=USAGE, description="Run many agent tasks and collect their results.")
    parser.add_argument("tasks", help="a JSONL file (one task a line) or a directory of task files")
    parser.add_argument("--out", help="output directory (default: beside TASKS, named <TASKS>.batch)")
    parser.add_argument(
        "--workers", type=int, help="tasks run at once (default: one per CPU of the machine or cluster)"
    )
    parser.add_argument("--ray", metavar="auto|ADDRESS", help="run the tasks on a Ray cluster")
    parser.add_argument("--profile", default="embed", help="the profile every task composes (default embed)")
    parser.add_argument("--patch", action="append", default=[], help="a patch layer for every task (repeatable)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="default time budget per task, seconds")
    parser.add_argument("--command-timeout", type=float, default=600.0, help="bound of each setup/check command")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto", help="confinement of setup/check")
    parser.add_argument("--prices", help="USD per million tokens per provider/model (JSON or YAML)")
    ns = parser.parse_args(argv)
    if ns.workers is not None and ns.workers < 1:
        raise BatchError("--workers must be at least 1")
    if ns.timeout <= 0 or ns.command_timeout <= 0:
        raise BatchError("--timeout and --command-timeout must be positive")
    for patch in ns.patch:
        if not Path(patch).is_file():
            raise BatchError(f"--patch {patch}: no such file")
    return ns


def options_of(ns: argparse.Namespace) -> Options:
    tasks = Path(ns.tasks)
    out = Path(ns.out) if ns.out else tasks.with_name(tasks.stem + ".batch") if tasks.suffix else Path(f"{tasks}.batch")
    return Options(
        out=out.resolve(),
        workers=ns.workers,
        profile=ns.profile,
        patches=list(ns.patch),
        timeout=ns.timeout,
        command_timeout=ns.command_timeout,
        sandbox=ns.sandbox,
        ray=ns.ray,
        prices=read_prices(Path(ns.prices)) if ns.prices else {},
    )


def backend_for(options: Options) -> Backend:
    """The local pool, or Ray (imported only here, only when asked for)."""
    if options.ray is None:
        from pydsh.batch.local import LocalBackend

        return LocalBackend(options.out)
    try:
        from pydsh.batch.ray_backend import RayBackend
    except ImportError:
        raise BatchError("the Ray backend needs Ray: pip install 'pydsh[ray]'") from None
    return RayBackend(options.ray, options.out)


def run_batch(argv: list[str]) -> int:
    """The ``pydsh batch`` command."""
    try:
        ns = parse_args(argv)
        options = options_of(ns)
        return asyncio.run(_run(Path(ns.tasks), options))
    except BatchError as exc:
        print(f"pydsh batch: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def _run(tasks: Path, options: Options) -> int:
    from pydsh.batch.progress import display_for
    from pydsh.batch.summary import summary_table

    backend = backend_for(options)
    batch = Batch(tasks, options, backend, display_for(sys.stderr))
    presses: list[int] = []

    def interrupt() -> None:
        presses.append(1)
        if len(presses) == 1:
            print(
                "pydsh batch: stopping: running tasks are interrupted and resume next time (Ctrl-C again to kill them)",
                file=sys.stderr,
            )
            batch.stop()
        else:
            batch.kill()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)
    try:
        records = await batch.run()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await backend.close()
    print(summary_table(records))
    print(f"results: {batch.results_path}")
    if presses:
        print("pydsh batch: interrupted; run the same command again to finish the remaining tasks", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0 if all(r.get("passed") for r in records) else 1
