"""A batch from task file to ``results.jsonl``: skip what is finished, run the rest on a backend with
bounded concurrency, write each result as it arrives, and stop cleanly when asked."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydsh.batch.errors import BatchError
from pydsh.batch.results import ResultsFile, finished, read_results
from pydsh.batch.tasks import Problem, Task, read_tasks
from pydsh.batch.worker import Job, Report

PRICE_BUCKETS = {"input": "inputTokens", "output": "outputTokens", "cacheRead": "cacheReadTokens"}
PRICE_BUCKETS["cacheWrite"] = "cacheWriteTokens"


@dataclass
class Options:
    """How a batch runs (the command line's options)."""

    out: Path
    workers: int | None = None
    """Tasks run at once (``None``: the backend's capacity)."""
    profile: str = "embed"
    patches: list[str] = field(default_factory=list)
    timeout: float = 1800.0
    command_timeout: float = 600.0
    sandbox: str = "auto"
    ray: str | None = None
    """``None``: the local pool; ``auto`` or a cluster address: Ray."""
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    """USD per million tokens by bucket, per ``provider/model``."""


class Backend(Protocol):
    """Where jobs run: the local process pool or a Ray cluster."""

    name: str

    @property
    def capacity(self) -> int:
        """How many tasks run at once when ``--workers`` is not given."""

    async def run(self, job: Job, report: Report) -> dict[str, Any] | None:
        """The job's result record, or ``None`` when it was stopped before finishing (it stays resumable)."""

    def stop(self) -> None:
        """Interrupt running tasks cleanly (their logs written)."""

    def kill(self) -> None:
        """End running tasks at once."""

    async def close(self) -> None: ...


class Display(Protocol):
    """What the user watches: per-task states while the batch runs."""

    def begin(self, total: int, skipped: int) -> None: ...

    def update(self, task_id: str, progress: dict[str, Any]) -> None: ...

    def finished(self, record: dict[str, Any]) -> None: ...

    def end(self) -> None: ...


class Batch:
    """One run over a task list: results so far, the backend, and the stop switch."""

    def __init__(self, tasks_path: Path, options: Options, backend: Backend, display: Display) -> None:
        self.tasks_path = tasks_path
        self.options = options
        self.backend = backend
        self.display = display
        self.stopping = False
        self.results_path = options.out / "results.jsonl"

    async def run(self) -> list[dict[str, Any]]:
        """Run every unfinished task; the result records of the whole task list, in its order."""
        listing = read_tasks(self.tasks_path)
        done = finished(read_results(self.results_path))
        pending = [task for task in listing.tasks if task.id not in done]
        problems = [problem for problem in listing.problems if problem.id not in done]
        skipped = len(listing.tasks) - len(pending) + len(listing.problems) - len(problems)
        self.display.begin(len(pending) + len(problems), skipped)
        limit = asyncio.Semaphore(self.options.workers or self.backend.capacity)
        with ResultsFile(self.results_path) as sink:
            for problem in problems:
                self._write(sink, invalid(problem))
            await asyncio.gather(*(self._one(task, limit, sink) for task in pending))
        self.display.end()
        latest = read_results(self.results_path)
        order = [t.id for t in listing.tasks] + [p.id for p in listing.problems]
        return [latest[task_id] for task_id in dict.fromkeys(order) if task_id in latest]

    async def _one(self, task: Task, limit: asyncio.Semaphore, sink: ResultsFile) -> None:
        async with limit:
            if self.stopping:
                return
            self.display.update(task.id, {"state": "starting"})
            record = await self.backend.run(self.job(task), lambda progress: self.display.update(task.id, progress))
        if record is None:
            self.display.update(task.id, {"state": "interrupted"})
            return
        self._write(sink, record)

    def _write(self, sink: ResultsFile, record: dict[str, Any]) -> None:
        record = {**record, "cost": cost(record, self.options.prices)}
        sink.append(record)
        self.display.finished(record)

    def job(self, task: Task) -> Job:
        """The worker's job for ``task``."""
        options = self.options
        return Job(
            task=task.to_json(),
            root=str(options.out / "tasks" / task.id),
            profile=options.profile,
            patches=[str(Path(p).resolve()) for p in options.patches],
            gate=self.gate(),
            timeout=options.timeout,
            command_timeout=options.command_timeout,
            sandbox=options.sandbox,
            user_home=user_home(),
        )

    def gate(self) -> dict[str, Any]:
        """The shared route gate the backend's workers all reach."""
        gate = getattr(self.backend, "gate", None)
        return gate if isinstance(gate, dict) else {"store": "file", "path": str(self.options.out / "gates")}

    def stop(self) -> None:
        """Start no more tasks and interrupt the running ones (first Ctrl-C)."""
        self.stopping = True
        self.backend.stop()

    def kill(self) -> None:
        """End the running tasks now (second Ctrl-C)."""
        self.stopping = True
        self.backend.kill()


def invalid(problem: Problem) -> dict[str, Any]:
    """The result line of a task that could not be read."""
    error = f"{problem.source}: {problem.message}"
    return {"id": problem.id, "status": "invalid", "passed": False, "check": None, "error": error}


def cost(record: dict[str, Any], prices: dict[str, dict[str, float]]) -> float | None:
    """The record's cost in USD when its route has prices (``None`` otherwise)."""
    price = prices.get(str(record.get("route")))
    tokens = record.get("tokens")
    if price is None or not isinstance(tokens, dict):
        return None
    total = sum(price.get(bucket, 0.0) * float(tokens.get(key, 0)) for bucket, key in PRICE_BUCKETS.items())
    return round(total / 1_000_000, 6)


def user_home() -> str | None:
    """The user's ``DSH_HOME`` (what each task's shard carries over), if it exists."""
    home = Path(os.environ.get("DSH_HOME") or "~/.pydsh").expanduser()
    return str(home) if home.is_dir() else None


def read_prices(path: Path) -> dict[str, dict[str, float]]:
    """A prices file: ``{"provider/model": {"input": 0.27, "output": 1.1, ...}}`` in USD per million tokens."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BatchError(f"cannot read prices file {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise BatchError(f"prices file {path}: expected a mapping of provider/model to prices")
    prices: dict[str, dict[str, float]] = {}
    for route, entry in data.items():
        if not isinstance(entry, dict) or not set(entry) <= set(PRICE_BUCKETS):
            raise BatchError(f"prices file {path}: {route!r} needs prices among {', '.join(PRICE_BUCKETS)}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in entry.values()):
            raise BatchError(f"prices file {path}: {route!r} has a price that is not a non-negative number")
        prices[str(route)] = {k: float(v) for k, v in entry.items()}
    return prices
