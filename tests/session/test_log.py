"""The live log: append semantics, validation rules, derived history, repair and fork."""

from __future__ import annotations

import copy
import gc
import json
import math
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.session.errors import SessionForkError, SessionFormatUnsupportedError, SessionLogError
from pydsh.session.events import collector_paused, freeze_parsed, make_header, snapshot, thaw
from pydsh.session.log import Session, SessionStore
from pydsh.session.repair import tail_turn_closers
from tests.conftest import golden_rows


def new_session(**kw: Any) -> Session:
    return Session(make_header("s1", 1, cwd="/w", **kw))


def user(text: str, mid: str = "m1") -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": mid}


def tool_result(call_id: str, mid: str) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "role": "tool",
            "source": {"kind": "tool", "callId": call_id},
            "toolCallId": call_id,
            "content": [{"type": "text", "text": "ok"}],
            "isError": False,
            "id": mid,
        },
    }


def assistant(*blocks: dict[str, Any], mid: str = "a1", step: int = 1) -> dict[str, Any]:
    message = {"role": "assistant", "content": list(blocks), "source": {"kind": "model"}, "id": mid}
    return {"turn": 1, "step": step, "message": message, "stream": []}


def open_step(s: Session) -> None:
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})


# -- golden fixture --------------------------------------------------------------------------


def test_golden_fixture_parses_validates_and_derives_messages() -> None:
    header, events = golden_rows()
    session = Session(header, events)
    messages = session.derive_messages()
    kinds = [(m["role"], m["source"]["kind"]) for m in messages]
    assert kinds == [
        ("system", "system-prompt"),
        ("user", "user"),
        ("user", "runtime-context"),
        ("user", "time-context"),
        ("assistant", "model"),
        ("tool", "tool"),
        ("tool", "tool"),
        ("tool", "tool"),
        ("assistant", "model"),
    ]
    assert messages[-1]["content"][-1] == {"type": "text", "text": "Read all three files."}
    assert session.request_header() == events[11]["data"]["header"]
    assert session.derive_messages() is not session.derive_messages()


def test_stored_events_are_frozen_like_appended_ones() -> None:
    header, events = golden_rows()
    session = Session(header, events)
    message = session.derive_messages()[1]
    with pytest.raises(TypeError, match="immutable"):
        message["content"].append({"type": "text", "text": "edited"})
    with pytest.raises(TypeError, match="immutable"):
        session.request_header()["config"]["model"] = "other"  # type: ignore[index]
    assert session.events[0]["data"] == events[0]["data"] and session.events[0] is not events[0]


def containers(value: Any) -> list[Any]:
    """``value`` and every dict and list inside it."""
    if isinstance(value, dict):
        return [value, *(c for item in value.values() for c in containers(item))]
    if isinstance(value, list):
        return [value, *(c for item in value for c in containers(item))]
    return []


def test_logged_data_is_out_of_the_cyclic_collectors_view() -> None:
    header, events = golden_rows()
    session = Session(header, events)
    session.append("user/message", user("hi", "m9"), surface_op="append")
    assert all(containers(event["data"]) for event in session.events)
    tracked = [c for event in session.events for c in containers(event["data"]) if gc.is_tracked(c)]
    assert tracked == [], "acyclic frozen trees need no walk by every full collection"
    assert session.events[-1]["data"]["content"][0]["text"] == "hi"
    read_back = freeze_parsed(json.loads(json.dumps(events[-1]["data"])))
    assert read_back == events[-1]["data"] and not any(gc.is_tracked(c) for c in containers(read_back))


# -- append semantics ------------------------------------------------------------------------


def test_append_assigns_seq_time_and_freezes_data() -> None:
    s = new_session()
    data = {"turn": 1}
    ev = s.append("turn/start", data)
    assert (ev["seq"], type(ev["time"])) == (0, int)
    data["turn"] = 99
    assert ev["data"]["turn"] == 1
    with pytest.raises(TypeError):
        ev["data"]["turn"] = 2
    assert thaw(ev["data"]) == {"turn": 1}
    assert copy.deepcopy(ev)["data"] == {"turn": 1}


@pytest.mark.parametrize(
    "bad",
    [math.nan, math.inf, -0.0, 2**53, {1: "x"}, b"bytes", {1, 2}],
)
def test_lossless_json_is_enforced(bad: object) -> None:
    s = new_session()
    with pytest.raises(TypeError):
        s.append("session/title", {"title": "t", "messageSeqs": [], "source": {"kind": "user"}, "x": bad})
    assert s.events == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"a": [{"b": 1}, {"c": math.nan}]}, "data.a[1].c: non-finite number nan is not lossless JSON"),
        ({"a": ({"b": 2**53},)}, "data.a[0].b: integer 9007199254740992 is outside the safe range"),
        ({"a": {"b": {1: "x"}}}, "data.a.b: object key 1 is not a string"),
        ({"a": [[b"x"]]}, "data.a[0][0]: bytes is not lossless JSON"),
    ],
)
def test_a_lossy_value_is_named_by_its_path(data: dict[str, object], message: str) -> None:
    with pytest.raises(TypeError) as caught:
        snapshot(data)
    assert str(caught.value).startswith(message)


def test_tuples_are_stored_as_lists() -> None:
    s = new_session()
    s.append("turn/start", {"turn": 1})
    ev = s.append("todo/write", {"todos": ({"content": "a", "status": "pending"},)})
    assert isinstance(ev["data"]["todos"], list)


def test_observer_reentrant_append_raises() -> None:
    s = new_session()
    seen: list[BaseException] = []

    def observer(session: Session, event: dict[str, Any]) -> None:
        try:
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        except RuntimeError as exc:
            seen.append(exc)

    s.publish = observer
    s.append("turn/start", {"turn": 1})
    assert "reentered" in str(seen[0])
    assert len(s.events) == 1


# -- validation rules (each names the seq) -----------------------------------------------------


def bad_logs() -> list[tuple[str, list[tuple[str, Any, dict[str, Any]]], str]]:
    return [
        ("turn inside turn", [("turn/start", {"turn": 1}, {}), ("turn/start", {"turn": 2}, {})], "seq 1"),
        ("turn numbering", [("turn/start", {"turn": 2}, {})], "expected 1"),
        ("step outside turn", [("step/start", {"turn": 1, "step": 1}, {})], "outside an open turn"),
        (
            "turn/end with open step",
            [
                ("turn/start", {"turn": 1}, {}),
                ("step/start", {"turn": 1, "step": 1}, {}),
                ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}, {}),
            ],
            "step 1 is open",
        ),
        (
            "result without call",
            [
                ("turn/start", {"turn": 1}, {}),
                ("step/start", {"turn": 1, "step": 1}, {}),
                ("tool/result", tool_result("c1", "r1"), {"surface_op": "append"}),
            ],
            "no tool/call",
        ),
        ("surface type without op", [("user/message", user("hi"), {})], "needs surfaceOp"),
        ("op on non-surface", [("turn/start", {"turn": 1}, {"surface_op": "append"})], "not a surface type"),
        (
            "replace of unknown node",
            [("user/message", user("hi"), {"surface_op": {"op": "replace", "startSeq": 5, "endSeq": 5}})],
            "current surface",
        ),
        (
            "sources in the future",
            [("user/message", user("hi"), {"surface_op": "append", "source_event_seqs": [3]})],
            "earlier events",
        ),
        ("bad payload", [("turn/start", {"turn": "one"}, {})], "positive integer"),
        ("request outside turn", [("request/context", {"provider": "p", "model": "m"}, {})], "outside"),
    ]


@pytest.mark.parametrize(("name", "steps", "needle"), bad_logs(), ids=[b[0] for b in bad_logs()])
def test_each_rule_rejects_a_crafted_bad_log(name: str, steps: list[Any], needle: str) -> None:
    header = make_header("s1", 1)
    s = Session(header)
    with pytest.raises(SessionLogError) as info:
        for etype, data, kw in steps:
            s.append(etype, data, **kw)
    last_seq = len(s.events)
    assert f"seq {last_seq}" in str(info.value)
    assert needle in str(info.value)
    rows = [{"type": t, "seq": i, "time": 1, "data": d} for i, (t, d, _kw) in enumerate(steps)]
    for row, (_t, _d, kw) in zip(rows, steps, strict=True):
        if "surface_op" in kw:
            row["surfaceOp"] = kw["surface_op"]
        if "source_event_seqs" in kw:
            row["sourceEventSeqs"] = kw["source_event_seqs"]
    with pytest.raises(SessionLogError, match=f"seq {last_seq}"):
        Session(header, rows)


def test_unknown_type_refuses_unless_ignorable() -> None:
    header = make_header("s1", 1)
    with pytest.raises(SessionFormatUnsupportedError, match="unknown event type"):
        Session(header, [{"type": "mystery/thing", "seq": 0, "time": 1, "data": {}}])
    s = Session(header, [{"type": "mystery/thing", "seq": 0, "time": 1, "data": {}, "ignorable": True}])
    assert s.events[0]["type"] == "mystery/thing"


def test_retired_header_keys_and_seed_mismatch_rejected() -> None:
    header = make_header("s1", 1)
    with pytest.raises(SessionLogError, match="retired"):
        Session({**header, "sandboxMode": "x"})
    seeded = {**header, "isSeeded": True}
    with pytest.raises(SessionLogError, match="isSeeded"):
        Session(seeded, [])


def test_replace_rules_tool_result_and_system_node() -> None:
    s = new_session()
    open_step(s)
    s.append(
        "system/message",
        {
            "turn": 1,
            "step": 1,
            "message": {"role": "system", "content": [], "source": {"kind": "system-prompt"}, "id": "s"},
        },
        surface_op="append",
    )
    s.append("user/message", user("hi"), surface_op="append")
    s.append(
        "assistant/message",
        assistant({"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}),
        surface_op="append",
    )
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"})
    s.append("tool/result", tool_result("c1", "r1"), surface_op="append", source_event_seqs=[5])
    with pytest.raises(SessionLogError, match="only a system/message"):
        s.append(
            "user/message",
            user("summary", "m2"),
            surface_op={"op": "replace", "startSeq": 2, "endSeq": 3},
            source_event_seqs=[2, 3],
        )
    changed = tool_result("c1", "r1")
    changed["message"]["isError"] = True
    with pytest.raises(SessionLogError, match=r"only message\.content"):
        s.append(
            "tool/result", changed, surface_op={"op": "replace", "startSeq": 6, "endSeq": 6}, source_event_seqs=[6]
        )
    pruned = tool_result("c1", "r1")
    pruned["message"]["content"] = [{"type": "text", "text": "[pruned]"}]
    gen = s.surface.content_generation
    s.append("tool/result", pruned, surface_op={"op": "replace", "startSeq": 6, "endSeq": 6}, source_event_seqs=[6])
    assert s.surface.content_generation == gen + 1
    assert s.derive_messages()[-1]["content"][0]["text"] == "[pruned]"
    s.append(
        "user/message",
        user("compact", "m3"),
        surface_op={"op": "replace", "startSeq": 3, "endSeq": 7},
        source_event_seqs=[3, 4, 7],
    )
    assert [m["id"] for m in s.derive_messages()] == ["m3"]


def system(text: str, mid: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    message = {"role": "system", "content": content, "source": {"kind": "system-prompt"}, "id": mid}
    return {"turn": 1, "step": 1, "message": message}


def test_system_nodes_follow_appends_and_replaces() -> None:
    s = new_session()
    open_step(s)
    s.append("system/message", system("one", "s1"), surface_op="append")
    s.append("user/message", user("hi"), surface_op="append")
    s.append("system/message", system("two", "s2"), surface_op="append")
    assert s.surface.system_nodes() == [2, 4]
    s.append(
        "user/message",
        user("summary", "m2"),
        surface_op={"op": "replace", "startSeq": 3, "endSeq": 4},
        source_event_seqs=[3, 4],
    )
    assert s.surface.system_nodes() == [2]
    s.append("system/message", system("three", "s3"), surface_op="append")
    s.append(
        "system/message",
        system("new", "s4"),
        surface_op={"op": "replace", "startSeq": 2, "endSeq": 2},
        source_event_seqs=[2],
    )
    assert s.surface.system_nodes() == [7, 6] == [n for n in s.surface.nodes if s.events[n]["type"] == "system/message"]


def test_empty_assistant_and_system_messages_are_skipped() -> None:
    s = new_session()
    open_step(s)
    s.append(
        "system/message",
        {
            "turn": 1,
            "step": 1,
            "message": {"role": "system", "content": [], "source": {"kind": "system-prompt"}, "id": "s"},
        },
        surface_op="append",
    )
    s.append("assistant/message", assistant(), surface_op="append")
    assert s.derive_messages() == []


# -- repair and fork -------------------------------------------------------------------------


def crashed_log() -> list[dict[str, Any]]:
    s = new_session()
    open_step(s)
    s.append(
        "assistant/message",
        assistant(
            {"type": "tool-call", "id": "c0", "name": "read", "arguments": "{}"},
            {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
        ),
        surface_op="append",
    )
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c0", "name": "read", "arguments": "{}"})
    return s.events


def test_interrupted_closers_exact_codes_texts_and_order() -> None:
    events = crashed_log()
    closers = tail_turn_closers(events)
    assert [c["type"] for c in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    first, second = closers[0], closers[1]
    assert first["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert first["sourceEventSeqs"] == [3]
    assert first["data"]["message"]["id"] == "interrupted-tool-result-c0-4"
    assert first["data"]["message"]["content"][0]["text"].startswith(
        "The tool call was interrupted after it was recorded"
    )
    assert second["data"]["error"]["code"] == "TOOL_NOT_STARTED"
    assert "sourceEventSeqs" not in second
    assert second["data"]["message"]["content"][0]["text"] == (
        "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
    )
    assert closers[-1]["data"] == {"turn": 1, "reason": {"kind": "interrupted"}}
    assert all(c["time"] == events[-1]["time"] for c in closers)
    repaired = Session(make_header("s1", 1, cwd="/w"), events + closers)
    assert tail_turn_closers(repaired.events) == []


def test_closers_repair_only_the_turn_after_the_last_turn_end() -> None:
    first = crashed_log()
    s = Session(make_header("s1", 1, cwd="/w"), first + tail_turn_closers(first))
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    call = {"type": "tool-call", "id": "c9", "name": "read", "arguments": "{}"}
    message = {"role": "assistant", "content": [call], "source": {"kind": "model"}, "id": "a9"}
    s.append("assistant/message", {"turn": 2, "step": 1, "message": message, "stream": []}, surface_op="append")
    closers = tail_turn_closers(s.events)
    assert [c["type"] for c in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0]["data"]["message"]["toolCallId"] == "c9"
    assert closers[0]["data"]["message"]["id"] == f"interrupted-tool-result-c9-{s.seq + 1}"
    assert closers[-1]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}


async def test_fork_prefix_marker_closers_and_errors() -> None:
    k = Kernel()
    store = SessionStore(k.ctx)
    source = store.new(make_header("src", 1, cwd="/w"), crashed_log())
    prefix = store.fork_prefix(source)
    assert prefix[4] == {"type": "session/end-seed", "seq": 4, "time": prefix[3]["time"], "data": {"inherited": True}}
    assert prefix[-1]["data"]["reason"] == {"kind": "forked"}
    assert prefix[5]["data"]["message"]["id"] == "forked-tool-result-c0-5"
    assert "inherited by this branch" in prefix[5]["data"]["message"]["content"][0]["text"]
    child = store.new(
        make_header("child", 2, cwd="/w", is_seeded=True, parent_session="src"), prefix, inherited_event_count=4
    )
    assert child.lifecycle_start == 4
    with pytest.raises(SessionForkError) as info:
        store.fork_prefix(source, boundary=99)
    assert info.value.code == "INVALID_BOUNDARY"


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_pause_nests_and_restores_the_callers_setting(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("boom")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
