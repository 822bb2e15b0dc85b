"""Task files: every usable task read and checked, every unusable one a one-line problem of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pydsh.batch.errors import BatchError
from pydsh.batch.tasks import Task, read_tasks, task_from_json


def test_a_jsonl_file_gives_checked_tasks_and_one_problem_per_bad_line(tmp_path: Path) -> None:
    lines = [
        {"id": "a", "prompt": "fix it", "workspace": "src", "setup": "make", "check": ["make test", "make lint"]},
        {"prompt": "no id", "repo": "https://example.org/r.git", "ref": "v1", "timeout": 60, "tokens": 5000},
        "{broken",
        {"id": "b", "prompt": "x", "tokn": 5},
        {"id": "a", "prompt": "same id"},
        {"id": "c", "prompt": " "},
        {"id": "d", "prompt": "x", "timeout": -1},
        {"id": "e", "prompt": "x", "workspace": "w", "repo": "r"},
        {"id": "f", "prompt": "x", "provider": "p"},
        {"id": "../up", "prompt": "x"},
    ]
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (tmp_path / "tasks.jsonl").write_text(text + "\n")

    found = read_tasks(tmp_path / "tasks.jsonl")

    assert found.tasks == [
        Task("a", "fix it", workspace=str(tmp_path / "src"), setup=("make",), check=("make test", "make lint")),
        Task("line-2", "no id", repo="https://example.org/r.git", ref="v1", timeout=60.0, tokens=5000),
    ]
    assert [(p.id, p.source, p.message) for p in found.problems] == [
        (
            "line-3",
            "tasks.jsonl:3",
            "not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (
            "b",
            "tasks.jsonl:4",
            "unknown task field 'tokn' (known: check, id, model, preset, prompt, provider, ref, repo, setup, timeout, tokens, workspace)",
        ),
        ("c", "tasks.jsonl:6", 'a task needs a non-empty "prompt"'),
        ("d", "tasks.jsonl:7", '"timeout" must be a positive number of seconds'),
        ("e", "tasks.jsonl:8", 'give either "workspace" (a directory to copy) or "repo" (a git repository), not both'),
        ("f", "tasks.jsonl:9", 'give "provider" and "model" together'),
        (
            "line-10",
            "tasks.jsonl:10",
            "task id '../up' is not a plain name (letters, digits, '.', '_', '-'; 128 at most)",
        ),
        ("a", "a", 'task id "a" is used twice'),
    ]


def test_a_directory_holds_one_task_per_json_or_yaml_file_named_by_its_stem(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text('{"prompt": "first"}')
    (tmp_path / "two.yaml").write_text("prompt: second\nrepo: ../repo\n")
    (tmp_path / "notes.txt").write_text("ignored")
    (tmp_path / "bad.yml").write_text("prompt: [unclosed\n")

    found = read_tasks(tmp_path)

    assert [t.id for t in found.tasks] == ["one", "two"]
    assert found.tasks[1].repo == str(tmp_path.parent / "repo")
    assert [(p.id, p.source) for p in found.problems] == [("bad", "bad.yml")]
    assert found.problems[0].message.startswith("not valid YAML: ")


def test_a_path_that_holds_no_tasks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BatchError, match=f"no task file or directory at {tmp_path / 'x'}"):
        read_tasks(tmp_path / "x")
    with pytest.raises(BatchError, match="no task files"):
        read_tasks(tmp_path)


def test_a_task_crosses_to_a_worker_unchanged() -> None:
    task = Task("a", "p", repo="r", ref="main", setup=("s",), check=("c1", "c2"), provider="x", model="y", tokens=9)
    assert task_from_json(json.loads(json.dumps(task.to_json()))) == task
