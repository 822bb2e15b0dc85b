"""The summary table printed when a batch ends, and the one-line account of each finished task."""

from __future__ import annotations

from typing import Any

from pydsh.batch.results import STATUSES

SHOWN_FAILURES = 20
"""How many tasks that did not pass are named under the table (the rest are counted)."""


def task_line(record: dict[str, Any]) -> str:
    """``<id> <verdict> (<status>, <tokens> tokens, <wall> s)``, with the error when there is one."""
    verdict = "passed" if record.get("passed") else "not passed"
    details = [str(record.get("status"))]
    if record.get("check"):
        details.append(f"check {record['check']}")
    tokens = (record.get("tokens") or {}).get("totalTokens")
    if tokens is not None:
        details.append(f"{tokens} tokens")
    if record.get("wallS") is not None:
        details.append(f"{record['wallS']:.1f} s")
    line = f"{record['id']} {verdict} ({', '.join(details)})"
    return f"{line}: {record['error']}" if record.get("error") else line


def summary_table(records: list[dict[str, Any]]) -> str:
    """Tasks, passes, tokens, cost and wall time per status, a total row, and the tasks that did not pass."""
    rows = [("status", "tasks", "passed", "tokens", "cost $", "wall s")]
    for status in (*STATUSES, None):
        group = [r for r in records if status is None or r.get("status") == status]
        if status is not None and not group:
            continue
        rows.append(_row(status or "total", group))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    failed = [r for r in records if not r.get("passed")]
    if failed:
        lines.append("")
        lines.append(f"not passed ({len(failed)}):")
        lines += [f"  {task_line(r)}" for r in failed[:SHOWN_FAILURES]]
        if len(failed) > SHOWN_FAILURES:
            lines.append(f"  … and {len(failed) - SHOWN_FAILURES} more (see results.jsonl)")
    return "\n".join(lines)


def _row(label: str, group: list[dict[str, Any]]) -> tuple[str, str, str, str, str, str]:
    tokens = sum(int((r.get("tokens") or {}).get("totalTokens", 0)) for r in group)
    costs = [r["cost"] for r in group if isinstance(r.get("cost"), (int, float))]
    wall = sum(float(r.get("wallS") or 0) for r in group)
    passed = sum(1 for r in group if r.get("passed"))
    price = f"{sum(costs):.4f}" if costs else "-"
    return (label, str(len(group)), str(passed), str(tokens), price, f"{wall:.1f}")
