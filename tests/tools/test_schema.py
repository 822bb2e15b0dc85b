"""Argument validation texts of spec 05 §3.2."""

from __future__ import annotations

from typing import Any

import pytest

from pydsh.tools.schema import compact_json, validate

TODOS = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "content": {"type": "string"},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                },
                "required": ["content", "status"],
            },
        }
    },
    "required": ["todos"],
}
MIXED = {
    "type": "object",
    "properties": {
        "n": {"type": "number"},
        "i": {"type": "integer"},
        "b": {"type": "boolean"},
        "o": {"type": "object"},
        "a": {"type": "array"},
        "z": {"type": "null"},
        "c": {"const": "fixed"},
        "u": {"oneOf": [{"type": "string"}, {"type": "null"}]},
        "w": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    },
}


@pytest.mark.parametrize(
    ("schema", "value", "problems"),
    [
        (TODOS, {}, ['missing required property "todos"']),
        (TODOS, "x", ['"arguments" must be an object']),
        (
            TODOS,
            {"todos": [{"content": "a", "status": "done"}]},
            ['"todos[0].status" must be one of ["pending","in_progress","completed"]'],
        ),
        (
            TODOS,
            {"todos": [{"status": "pending", "extra": 1}, {"content": 2, "status": "pending"}]},
            [
                'missing required property "todos[0].content"',
                '"todos[0].extra" is not a declared property (additionalProperties: false)',
                '"todos[1].content" must be a string',
            ],
        ),
        (MIXED, {"n": "1"}, ['"n" must be a number']),
        (MIXED, {"n": float("inf")}, ['"n" must be a finite JSON number']),
        (MIXED, {"n": True}, ['"n" must be a number']),
        (MIXED, {"i": 1.5}, ['"i" must be an integer']),
        (MIXED, {"i": 2.0, "n": 1.5}, []),
        (MIXED, {"b": 1}, ['"b" must be a boolean']),
        (MIXED, {"o": []}, ['"o" must be an object']),
        (MIXED, {"a": {}}, ['"a" must be an array']),
        (MIXED, {"z": 0}, ['"z" must be null']),
        (MIXED, {"c": "other"}, ['"c" must be "fixed"']),
        (MIXED, {"u": None}, []),
        (MIXED, {"u": 3}, ['"u" must match exactly one oneOf branch (matched 0)']),
        (MIXED, {"w": 3}, ['"w" must match exactly one oneOf branch (matched 2)']),
    ],
)
def test_violation_texts(schema: dict[str, Any], value: Any, problems: list[str]) -> None:
    assert validate(schema, value) == problems


def test_top_level_unknown_keys_are_ignored() -> None:
    assert validate(TODOS, {"todos": [], "other": 1}) == []


def test_compact_json_prints_integral_floats_like_javascript() -> None:
    assert compact_json([1.0, -5.0, 0.5, "é"]) == '[1,-5,0.5,"é"]'
