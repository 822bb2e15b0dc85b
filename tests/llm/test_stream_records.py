"""Compact stream records, their strict expansion and block assembly (spec 02 §6, 04 §2.8, §3.5)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydsh.llm.stream_records import (
    AssistantStreamAccumulator,
    BlockAssembler,
    accumulate,
    expand_assistant_stream,
)
from tests.conftest import FIXTURES


def golden_streams() -> list[list[dict[str, Any]]]:
    rows = [json.loads(line) for line in (FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()[1:]]
    return [r["data"]["stream"] for r in rows if r["type"] == "assistant/message"]


def test_golden_records_round_trip_byte_for_byte() -> None:
    streams = golden_streams()
    assert len(streams) == 2
    for records in streams:
        timed = expand_assistant_stream(records)
        again = accumulate(timed)
        assert json.dumps(again) == json.dumps(records)


def test_golden_assembly_matches_logged_message() -> None:
    rows = [json.loads(line) for line in (FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()[1:]]
    for row in rows:
        if row["type"] != "assistant/message":
            continue
        asm = BlockAssembler()
        for _time, chunk in expand_assistant_stream(row["data"]["stream"]):
            asm.add(chunk)
        assert asm.content() == row["data"]["message"]["content"]
        assert asm.usage == row["data"]["usage"]
        assert asm.replay_state == row["data"]["message"]["source"]["replayState"]


def test_first_named_tool_delta_forms_its_own_record() -> None:
    acc = AssistantStreamAccumulator()
    acc.add({"type": "tool-call-delta", "index": 0, "id": "c", "name": "read", "argumentsDelta": ""}, 5)
    acc.add({"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": "{"}, 6)
    acc.add({"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": "}"}, 9)
    assert acc.records() == [
        {"type": "tool-call-chunks", "time0": 5, "index": 0, "dt": [], "id": "c", "name": "read", "args": [""]},
        {"type": "tool-call-chunks", "time0": 6, "index": 0, "dt": [3], "id": "c", "args": ["{", "}"]},
    ]


def test_degenerate_tool_deltas_and_other_chunks_stay_plain() -> None:
    acc = AssistantStreamAccumulator()
    empty_id = {"type": "tool-call-delta", "index": 0, "id": "", "argumentsDelta": "x"}
    empty_name = {"type": "tool-call-delta", "index": 0, "id": "c", "name": "", "argumentsDelta": "x"}
    acc.add(empty_id, 1)
    acc.add(empty_name, 2)
    acc.add({"type": "text-delta", "index": 1, "text": "a"}, 3)
    acc.add({"type": "text-delta", "index": 2, "text": "b"}, 3)
    acc.add({"type": "reasoning-delta", "index": 2, "text": "c"}, 4)
    records = acc.records()
    assert [r["type"] for r in records] == ["chunk", "chunk", "text-chunks", "text-chunks", "reasoning-chunks"]
    assert records[0] == {"type": "chunk", "time": 1, "chunk": empty_id}


@pytest.mark.parametrize(
    "records",
    [
        [{"type": "bogus", "time": 1}],
        [{"type": "chunk", "time": 1, "chunk": {"type": "usage", "usage": {}}, "extra": 1}],
        [{"type": "chunk", "time": 1.5, "chunk": {"type": "usage", "usage": {}}}],
        [{"type": "chunk", "time": 1, "chunk": {"type": "usage"}}],
        [{"type": "chunk", "time": 1, "chunk": {"type": "nope"}}],
        [{"type": "text-chunks", "time0": 1, "index": 0, "dt": [], "texts": []}],
        [{"type": "text-chunks", "time0": 1, "index": 0, "dt": [1], "texts": ["a"]}],
        [{"type": "text-chunks", "time0": 1, "index": 0, "dt": [], "texts": ["a"], "x": 0}],
        [{"type": "text-chunks", "time0": 2**53, "index": 0, "dt": [], "texts": ["a"]}],
        [{"type": "reasoning-chunks", "time0": 1, "index": -1, "dt": [], "texts": ["a"]}],
        [{"type": "tool-call-chunks", "time0": 1, "index": 0, "dt": [], "id": "", "args": ["a"]}],
        [{"type": "tool-call-chunks", "time0": 1, "index": 0, "dt": [], "id": "c", "name": "", "args": ["a"]}],
        [{"type": "tool-call-chunks", "time0": 1, "index": 0, "dt": [], "args": ["a"]}],
        [{"type": "chunk", "time": 1, "chunk": {"type": "finish", "reason": {"kind": "error"}}}],
        {"type": "chunk"},
    ],
)
def test_expansion_rejects_malformed_records(records: Any) -> None:
    with pytest.raises(TypeError):
        expand_assistant_stream(records)


# -- property: records -> chunks -> records is the identity, and chunks -> records -> chunks ----

_index = st.integers(0, 3)
_text = st.text(max_size=4)
_chunk = st.one_of(
    st.builds(lambda i, t: {"type": "text-delta", "index": i, "text": t}, _index, _text),
    st.builds(lambda i, t: {"type": "reasoning-delta", "index": i, "text": t}, _index, _text),
    st.builds(
        lambda i, cid, name, a: (
            {"type": "tool-call-delta", "index": i, "id": cid, "argumentsDelta": a}
            if name is None
            else {"type": "tool-call-delta", "index": i, "id": cid, "name": name, "argumentsDelta": a}
        ),
        _index,
        st.sampled_from(["", "c1", "c2"]),
        st.sampled_from([None, "", "read", "bash"]),
        _text,
    ),
    st.builds(
        lambda i, b: {"type": "block-start", "index": i, "blockType": b},
        _index,
        st.sampled_from(["text", "reasoning", "tool-call"]),
    ),
    st.builds(lambda i, t: {"type": "block-end", "index": i, "block": {"type": "text", "text": t}}, _index, _text),
    st.just({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}}),
    st.just({"type": "finish", "reason": {"kind": "stop"}}),
)
_timed = st.lists(st.tuples(st.integers(1_700_000_000_000, 1_700_000_009_999), _chunk), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_timed)
def test_round_trip_property(timed: list[tuple[int, dict[str, Any]]]) -> None:
    records = copy.deepcopy(accumulate(timed))
    expanded = expand_assistant_stream(records)
    assert expanded == timed
    assert json.dumps(accumulate(expanded)) == json.dumps(records)


# -- assembly ------------------------------------------------------------------------------------


def assemble(*chunks: dict[str, Any]) -> BlockAssembler:
    asm = BlockAssembler()
    for chunk in chunks:
        asm.add(chunk)
    return asm


def test_assembler_orders_by_first_seen_index_and_ignores_late_deltas() -> None:
    asm = assemble(
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "reasoning-delta", "index": 0, "text": "think"},
        {"type": "text-delta", "index": 1, "text": "he"},
        {"type": "text-delta", "index": 1, "text": "llo"},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "hello"}},
        {"type": "text-delta", "index": 1, "text": "ignored"},
        {"type": "tool-call-delta", "index": 2, "id": "c", "name": "read", "argumentsDelta": ""},
        {"type": "tool-call-delta", "index": 2, "id": "c", "argumentsDelta": '{"a":1}'},
    )
    assert asm.content() == [
        {"type": "text", "text": "hello"},
        {"type": "reasoning", "text": "think"},
        {"type": "tool-call", "id": "c", "name": "read", "arguments": '{"a":1}'},
    ]
    assert asm.finish == {"kind": "stop"}
    assert asm.usage is None


def test_block_end_wins_over_assembled_deltas() -> None:
    asm = assemble(
        {"type": "text-delta", "index": 0, "text": "abc"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "xyz"}},
    )
    assert asm.content() == [{"type": "text", "text": "xyz"}]


def test_max_tokens_drops_tool_calls_and_prunes_replay_blocks() -> None:
    envelope = {"response": {"kind": "k"}, "blocks": [{"type": "reasoning", "signature": "s"}, {"type": "tool-call"}]}
    asm = assemble(
        {"type": "reasoning-delta", "index": 0, "text": "r"},
        {"type": "tool-call-delta", "index": 1, "id": "c", "name": "n", "argumentsDelta": "{"},
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}},
        {"type": "finish", "reason": {"kind": "max-tokens"}, "replayState": envelope},
    )
    assert asm.content() == [{"type": "reasoning", "text": "r"}]
    assert asm.replay_state == {"response": {"kind": "k"}, "blocks": [{"type": "reasoning", "signature": "s"}]}
    assert asm.finish == {"kind": "max-tokens"}
    assert asm.usage == {"inputTokens": 1, "outputTokens": 1}


def test_interrupted_blocks_keep_visible_text_and_reasoning_only() -> None:
    asm = assemble(
        {"type": "reasoning-delta", "index": 0, "text": "  \n"},
        {"type": "text-delta", "index": 1, "text": "partial"},
        {"type": "tool-call-delta", "index": 2, "id": "c", "name": "n", "argumentsDelta": "{"},
        {"type": "reasoning-delta", "index": 3, "text": "why"},
    )
    assert asm.interrupted_blocks() == [{"type": "text", "text": "partial"}, {"type": "reasoning", "text": "why"}]
