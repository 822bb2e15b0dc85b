"""Argument validation against the supported JSON Schema subset, with the model-facing texts (spec 05 §3.2).

Violations are collected in schema-walk order: the node's own type/const/enum, then missing
required keys, then declared properties in schema order, then undeclared keys, then array items.
"""

from __future__ import annotations

import json
import math
from typing import Any

TYPE_TEXT = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def compact_json(value: Any) -> str:
    """Compact JSON as JavaScript prints it (integral floats without ``.0``)."""
    return json.dumps(_js_numbers(value), ensure_ascii=False, separators=(",", ":"))


def _js_numbers(value: Any) -> Any:
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def validate(schema: dict[str, Any], value: Any) -> list[str]:
    """Every violation of ``value`` against ``schema``; the root is written ``arguments``."""
    return validate_at(schema, value, "")


def _label(path: str) -> str:
    return path or "arguments"


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_finite_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and math.isfinite(value))


def _has_type(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "number":
        return _is_finite_number(value)
    if kind == "integer":
        return type(value) is int or (_is_finite_number(value) and float(value).is_integer())
    if kind == "boolean":
        return type(value) is bool
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return value is None if kind == "null" else True


def json_equal(a: Any, b: Any) -> bool:
    """JSON value equality (``true`` is not ``1``; ``1`` equals ``1.0``)."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _walk(schema: dict[str, Any], value: Any, path: str, out: list[str]) -> None:
    branches = schema.get("oneOf")
    if branches is not None:
        matched = sum(1 for branch in branches if not validate_at(branch, value, path))
        if matched != 1:
            out.append(f'"{_label(path)}" must match exactly one oneOf branch (matched {matched})')
            return
    kind = schema.get("type")
    if kind is not None and not _has_type(kind, value):
        if kind in ("number", "integer") and type(value) is float and not math.isfinite(value):
            out.append(f'"{_label(path)}" must be a finite JSON number')
        else:
            out.append(f'"{_label(path)}" must be {TYPE_TEXT.get(kind, kind)}')
        return
    if "const" in schema and not json_equal(value, schema["const"]):
        out.append(f'"{_label(path)}" must be {compact_json(schema["const"])}')
        return
    enum = schema.get("enum")
    if enum is not None and not any(json_equal(value, e) for e in enum):
        out.append(f'"{_label(path)}" must be one of {compact_json(enum)}')
        return
    if isinstance(value, dict):
        _walk_object(schema, value, path, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{i}]", out)


def _walk_object(schema: dict[str, Any], value: dict[str, Any], path: str, out: list[str]) -> None:
    properties: dict[str, Any] = schema.get("properties") or {}
    for key in schema.get("required") or ():
        if key not in value:
            out.append(f'missing required property "{_child(path, key)}"')
    for key, sub in properties.items():
        if key in value:
            _walk(sub, value[key], _child(path, key), out)
    if schema.get("additionalProperties") is False:
        for key in value:
            if key not in properties:
                out.append(f'"{_child(path, key)}" is not a declared property (additionalProperties: false)')


def validate_at(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    """Violations of ``value`` at ``path`` (used to count matching ``oneOf`` branches)."""
    problems: list[str] = []
    _walk(schema, value, path, problems)
    return problems
