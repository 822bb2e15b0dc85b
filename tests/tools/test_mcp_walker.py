"""The bounded reading of large MCP messages on its own: walked results, cut tool pages, refusals and their ids."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pydsh.tools.mcp_limits import (
    LARGE_MESSAGE_BYTES,
    MAX_MESSAGE_BYTES,
    Bounds,
    Refusal,
    ToolBudget,
    bound_message,
    definition_bytes,
    surrogate_escaped,
)


def walked_bounds(max_result_bytes: int = 10_000_000) -> Bounds:
    def block(item: Any) -> dict[str, Any]:
        if not isinstance(item, dict) or item.get("type") != "text" or not isinstance(item.get("text"), str):
            raise ValueError("text: Field required")
        return item

    return Bounds(MAX_MESSAGE_BYTES, max_result_bytes, lambda: ToolBudget(2, 10_000), definition_bytes, block)


def large(result: dict[str, Any], *, id_last: bool = False) -> str:
    """A response padded past the size from which messages are walked, its id first or (as some SDKs write) last."""
    padded = {**result, "padding": "p" * LARGE_MESSAGE_BYTES}
    if id_last:
        return json.dumps({"result": padded, "jsonrpc": "2.0", "id": 7})
    return json.dumps({"jsonrpc": "2.0", "id": 7, "result": padded})


def test_a_walked_result_is_one_text_block_and_a_walked_tool_page_is_cut() -> None:
    items = [{"type": "text", "text": f"line {i}"} for i in range(3)]
    message = bound_message(large({"content": items, "isError": False}), walked_bounds())
    assert message["result"]["content"] == [{"type": "text", "text": "line 0\nline 1\nline 2"}]
    assert message["result"]["isError"] is False and message["id"] == 7
    tools = [{"name": f"tool{i}", "inputSchema": {"type": "object"}} for i in range(4)]
    page = bound_message(large({"tools": tools}), walked_bounds())["result"]
    assert [t["name"] for t in page["tools"]] == ["tool0", "tool1"]
    assert page["_meta"] == {"pydsh/droppedTools": ["tool2", "tool3"]}


@pytest.mark.parametrize("id_last", [False, True], ids=["id-first", "id-last"])
def test_a_refused_walked_response_names_the_request_it_answers(id_last: bool) -> None:
    bad = {"content": [{"type": "text", "text": "fine"}, {"type": "text"}]}
    with pytest.raises(Refusal) as refused:
        bound_message(large(bad, id_last=id_last), walked_bounds())
    assert (refused.value.text, refused.value.message_id, refused.value.response) == (
        "returned an invalid MCP result: content.1: text: Field required",
        7,
        True,
    )
    with pytest.raises(Refusal) as too_much:
        bound_message(large({"content": [{"type": "text", "text": "x" * 2000}]}, id_last=id_last), walked_bounds(1000))
    assert too_much.value.text == "returned 2,000 bytes of content; the limit is 1,000 bytes (maxResultBytes)"
    assert too_much.value.message_id == 7


def test_a_large_server_notification_answers_no_request() -> None:
    notification = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "d" * 2000}})
    with pytest.raises(Refusal) as refused:
        bound_message(notification + " " * LARGE_MESSAGE_BYTES, walked_bounds())
    assert refused.value.response is False and refused.value.message_id is None


def test_only_a_lone_surrogate_escape_is_refused() -> None:
    assert surrogate_escaped(b'{"jsonrpc":"2.0","id":1,"result":{"text":"\\ud83d\\ude00"}}') is None
    lone = surrogate_escaped(b'{"jsonrpc":"2.0","id":1,"result":{"text":"a\\udc00"}}')
    assert lone is not None and (lone.text, lone.message_id, lone.response) == (
        "returned text with a lone UTF-16 surrogate (\\udc00), which is not valid Unicode",
        1,
        True,
    )
