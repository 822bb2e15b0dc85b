"""todo_write through the pipeline: result text, the todo/write event, validation (spec 05 §4.8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness, harness, text_of


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, [("tools", None), ("tool-todo", None)])
    yield world
    await world.close()


async def test_todo_write_result_and_event(h: Harness) -> None:
    todos = [
        {"content": "Write the parser", "status": "completed"},
        {"content": "Test it", "status": "in_progress"},
        {"content": "Ship", "status": "pending"},
        {"content": "Document", "status": "pending"},
    ]
    assert await h.text("todo_write", {"todos": todos}) == ("Updated todo list: 2 pending, 1 in progress, 1 completed.")
    (event,) = h.events("todo/write")
    assert event["data"] == {"todos": todos}
    assert await h.text("todo_write", {"todos": []}) == "Updated todo list: 0 pending, 0 in progress, 0 completed."
    assert h.events("todo/write")[-1]["data"] == {"todos": []}


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        (
            [{"content": "x", "status": "done"}],
            '"todos[0].status" must be one of ["pending","in_progress","completed"]',
        ),
        ([{"content": "x"}], 'missing required property "todos[0].status"'),
        (
            [{"content": "x", "status": "pending", "priority": "high"}],
            '"todos[0].priority" is not a declared property (additionalProperties: false)',
        ),
        ("x", '"todos" must be an array'),
    ],
)
async def test_todo_write_validation(h: Harness, todos: Any, message: str) -> None:
    outcome = await h.call("todo_write", {"todos": todos})
    assert text_of(outcome) == f"Error: invalid arguments: {message}"
    assert outcome.error == {"name": "ToolArgsError", "code": "INVALID_ARGS"}
    assert h.events("todo/write") == []
