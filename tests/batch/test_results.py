"""results.jsonl: appended line by line, read back past a line a kill cut short; the summary table."""

from __future__ import annotations

from pathlib import Path

from pydsh.batch.results import ResultsFile, finished, read_results
from pydsh.batch.runner import cost
from pydsh.batch.summary import summary_table


def test_lines_survive_a_torn_last_line_and_the_next_line_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as sink:
        sink.append({"id": "a", "status": "completed", "passed": True})
    with path.open("a") as raw:
        raw.write('{"id": "b", "stat')
    with ResultsFile(path) as sink:
        sink.append({"id": "c", "status": "invalid", "passed": False})
        sink.append({"id": "a", "status": "error", "passed": False})

    assert path.read_text().splitlines()[-3:] == [
        '{"id": "b", "stat',
        '{"id":"c","status":"invalid","passed":false}',
        '{"id":"a","status":"error","passed":false}',
    ]
    results = read_results(path)
    assert results == {"a": {"id": "a", "status": "error", "passed": False}, "c": results["c"]}
    assert finished(results) == {"a"}


def test_cost_comes_from_the_route_prices_per_million_tokens() -> None:
    record = {
        "route": "p/m",
        "tokens": {"inputTokens": 2_000_000, "outputTokens": 500_000, "cacheReadTokens": 1_000_000},
    }
    prices = {"p/m": {"input": 0.5, "output": 2.0, "cacheRead": 0.1}}
    assert cost(record, prices) == 2.1
    assert cost({**record, "route": "other/m"}, prices) is None


def test_the_summary_counts_each_status_and_names_what_did_not_pass() -> None:
    records = [
        {
            "id": "a",
            "status": "completed",
            "passed": True,
            "check": "passed",
            "tokens": {"totalTokens": 10},
            "wallS": 1.0,
            "cost": 0.5,
        },
        {
            "id": "b",
            "status": "completed",
            "passed": False,
            "check": "failed",
            "tokens": {"totalTokens": 5},
            "wallS": 2.0,
            "cost": None,
        },
        {"id": "c", "status": "invalid", "passed": False, "check": None, "error": "tasks.jsonl:3: not valid JSON"},
    ]
    assert summary_table(records).splitlines() == [
        "status     tasks  passed  tokens  cost $  wall s",
        "---------  -----  ------  ------  ------  ------",
        "completed      2       1      15  0.5000     3.0",
        "invalid        1       0       0       -     0.0",
        "---------  -----  ------  ------  ------  ------",
        "total          3       1      15  0.5000     3.0",
        "",
        "not passed (2):",
        "  b not passed (completed, check failed, 5 tokens, 2.0 s)",
        "  c not passed (invalid): tasks.jsonl:3: not valid JSON",
    ]
