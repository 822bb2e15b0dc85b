"""Rule 10 of the log (02 §13): compaction brackets pair up and the checkpoint follows its summary."""

from __future__ import annotations

from typing import Any

import pytest

from pydsh.compaction.engine import compact_checkpoint_source
from pydsh.contract.agent import user_message
from pydsh.session.errors import SessionLogError
from pydsh.session.events import make_header
from pydsh.session.log import Session


def session_with_prompts() -> Session:
    session = Session(make_header("s1", 1, cwd="/w"))
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message("one"), surface_op="append")
    session.append("user/message", user_message("two"), surface_op="append")
    return session


def summary(cid: str) -> dict[str, Any]:
    return {
        "compactionId": cid,
        "summary": [{"type": "text", "text": "s"}],
        "shadowedRange": {"start": 1, "end": 2},
        "shadowedSeqs": [1, 2],
        "shadowedTokenCount": 10,
        "provider": "p",
        "model": "m",
    }


def checkpoint(session: Session, cid: str, start: int) -> None:
    message = user_message("checkpoint", compact_checkpoint_source(cid))
    replace = {"op": "replace", "startSeq": 1, "endSeq": 2}
    sources = list(dict.fromkeys([start, len(session.events) - 1, 1, 2]))
    session.append("user/message", message, surface_op=replace, source_event_seqs=sources)


def test_a_well_formed_compaction_is_admitted_and_reads_back() -> None:
    session = session_with_prompts()
    start = session.append("compaction/start", {"compactionId": "c", "turn": 1})["seq"]
    session.append("compaction/summary", summary("c"))
    checkpoint(session, "c", start)
    session.append("compaction/end", {"compactionId": "c", "turn": 1})
    again = Session(session.header, [dict(e) for e in session.events])
    assert [m["content"][0]["text"] for m in again.derive_messages()] == ["checkpoint"]


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([("start", "c", 2)], "compaction/start names turn 2 but the open turn is 1"),
        ([("start", "c", 1), ("start", "d", 1)], "compaction/start while compaction c is open"),
        ([("summary", "c", None)], "compaction/summary c does not match an open compaction"),
        ([("start", "c", 1), ("end", "d", 1)], "compaction/end d does not match an open compaction"),
        ([("start", "c", 1), ("summary", "c", None), ("summary", "c", None)], "second compaction/summary"),
        ([("start", "c", 1), ("checkpoint", "c", None)], "must immediately follow its compaction/summary"),
        ([("start", "c", 1), ("summary", "c", None), ("checkpoint", "x", None)], "does not match the open compaction"),
    ],
)
def test_malformed_brackets_are_refused(steps: list[tuple[str, str, Any]], message: str) -> None:
    session = session_with_prompts()
    start = 0
    with pytest.raises(SessionLogError, match=message):
        for kind, cid, turn in steps:
            if kind == "start":
                start = session.append("compaction/start", {"compactionId": cid, "turn": turn})["seq"]
            elif kind == "summary":
                session.append("compaction/summary", summary(cid))
            elif kind == "end":
                session.append("compaction/end", {"compactionId": cid, "turn": turn})
            else:
                checkpoint(session, cid, start)


def test_a_bracket_left_open_by_a_dead_lifecycle_is_dropped_at_the_marker() -> None:
    session = session_with_prompts()
    session.append("compaction/start", {"compactionId": "dead", "turn": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    session.append("session/end-seed", {})
    session.append("compaction/start", {"compactionId": "next", "turn": None})
    session.append("compaction/end", {"compactionId": "next", "turn": None, "error": "no summary"})
