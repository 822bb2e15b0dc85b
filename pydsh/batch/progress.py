"""What the user watches while a batch runs: a ``rich`` live view on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from pydsh.batch.summary import task_line

if TYPE_CHECKING:
    from rich.console import RenderableType

SHOWN_RUNNING = 12
"""Running tasks listed in the live view (the others are counted)."""


class PlainDisplay:
    """One line per finished or interrupted task, for logs and pipes."""

    def __init__(self, out: TextIO = sys.stderr) -> None:
        self.out = out
        self.total = 0
        self.done = 0

    def begin(self, total: int, skipped: int) -> None:
        self.total = total
        before = f" ({skipped} finished before)" if skipped else ""
        self._print(f"pydsh batch: {total} tasks to run{before}")

    def update(self, task_id: str, progress: dict[str, Any]) -> None:
        if progress.get("state") == "interrupted":
            self._print(f"{task_id} interrupted; it resumes when the batch runs again")

    def finished(self, record: dict[str, Any]) -> None:
        self.done += 1
        self._print(f"[{self.done}/{self.total}] {task_line(record)}")

    def end(self) -> None:
        """Nothing to tear down."""

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)


class RichDisplay:
    """A live view: a bar over the whole batch and the state of each running task."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.bar = Progress(
            TextColumn("pydsh batch"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=self.console
        )
        self.overall = self.bar.add_task("tasks", total=0)
        self.states: dict[str, dict[str, Any]] = {}
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.passed = 0

    def begin(self, total: int, skipped: int) -> None:
        self.bar.update(self.overall, total=total)
        if skipped:
            self.console.print(f"{skipped} tasks finished before; skipping them")
        self.live.start()

    def update(self, task_id: str, progress: dict[str, Any]) -> None:
        if progress.get("state") == "interrupted":
            self.states.pop(task_id, None)
            self.live.console.print(f"{task_id} interrupted; it resumes when the batch runs again")
        else:
            self.states[task_id] = {**self.states.get(task_id, {}), **progress}
        self.live.update(self._render())

    def finished(self, record: dict[str, Any]) -> None:
        self.states.pop(record["id"], None)
        self.passed += bool(record.get("passed"))
        self.bar.advance(self.overall)
        style = "green" if record.get("passed") else "red"
        self.live.console.print(f"[{style}]{task_line(record)}[/]", markup=True, highlight=False)
        self.live.update(self._render())

    def end(self) -> None:
        self.live.stop()

    def _render(self) -> RenderableType:
        from rich.console import Group
        from rich.table import Table

        table = Table(box=None, show_header=True, header_style="bold")
        for column in ("task", "state", "step", "tokens"):
            table.add_column(column)
        for task_id, state in list(self.states.items())[:SHOWN_RUNNING]:
            table.add_row(
                task_id, str(state.get("state", "")), str(state.get("step", "")), str(state.get("tokens", ""))
            )
        more = len(self.states) - SHOWN_RUNNING
        footer = f"… {more} more running" if more > 0 else ""
        return Group(self.bar, table, footer)


def display_for(out: TextIO = sys.stderr) -> PlainDisplay | RichDisplay:
    """The live view on a terminal, plain lines otherwise."""
    return RichDisplay() if out.isatty() else PlainDisplay(out)
