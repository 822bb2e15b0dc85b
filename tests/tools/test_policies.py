"""Spill of large results and the repeat-call reminder (spec 05 §3.6–3.7)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from pydsh.contract.agent import user_message
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel import Context
from pydsh.kernel.text import utf16_len
from pydsh.tools import spill
from pydsh.tools.policies import estimate
from tests.tools.harness import POLICY, Harness, harness, text_of

P = "tests.tools.test_policies"
NOTICE = re.compile(
    r"\n\n\(Omitted (\d+) bytes\. Full formatted result stored at: (\S+)\. "
    r"Use read with offset/limit, or grep this path to search within it\.\)$"
)
BODIES: dict[str, str] = {}


def big_plugin(ctx: Context, config: None) -> None:
    def big(args: dict[str, Any], exec: ToolExec) -> str:
        if args.get("fail"):
            raise ToolError("E" * 80000)
        return BODIES[args["body"]]

    schema = {"type": "object", "properties": {"body": {"type": "string"}, "fail": {"type": "boolean"}}}
    ctx.require(TOOLS).register(ctx, ToolDefinition("big", "Big output.", schema, big))


big_plugin.inject = (TOOLS,)  # type: ignore[attr-defined]

ROWS = [
    ("tools", None),
    ("tool-fs", None),
    (f"{P}:big_plugin", None),
    ("spill-policy", {"maxInlineTokens": 12500}),
    ("repeat-tool-reminder", {"thresholds": [3, 5, 8]}),
]


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, ROWS)
    yield world
    await world.close()


# -- spill -----------------------------------------------------------------------------------


async def test_small_results_are_untouched(h: Harness) -> None:
    BODIES["small"] = "x" * 49984
    assert estimate([{"type": "text", "text": BODIES["small"]}]) == 12500
    assert await h.text("big", {"body": "small"}) == BODIES["small"]


async def test_large_result_keeps_head_and_tail_and_saves_the_whole(h: Harness) -> None:
    body = "".join(f"line {i:06}\n" for i in range(20000))
    BODIES["large"] = body
    out = await h.text("big", {"body": "large"})
    assert estimate([{"type": "text", "text": out}]) <= 12500
    match = NOTICE.search(out)
    assert match is not None
    kept = out[: match.start()]
    head, tail = kept.split("\n\n[...]\n\n")
    assert body.startswith(head)
    assert body.endswith(tail)
    assert len(head) >= 24000
    assert int(match.group(1)) == len(body.encode()) - len(head.encode()) - len(tail.encode())
    path = Path(match.group(2))
    assert path.read_text() == body
    assert path.name.endswith("-big.txt")
    assert re.fullmatch(r"[0-9a-f]{12}-big\.txt", path.name)
    assert path.parent.name == "s-1"
    assert path.parent.parent.name.startswith("pydsh-spill-")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert oct(path.parent.stat().st_mode & 0o777) == "0o700"


async def test_cuts_never_split_code_points(h: Harness) -> None:
    BODIES["emoji"] = "😀" * 30000
    out = await h.text("big", {"body": "emoji"})
    match = NOTICE.search(out)
    assert match is not None
    head, tail = out[: match.start()].split("\n\n[...]\n\n")
    assert set(head) == {"😀"}
    assert set(tail) == {"😀"}
    assert utf16_len(out) <= (12500 - 4) * 4
    assert int(match.group(1)) == 4 * (30000 - len(head) - len(tail))


async def test_read_and_errors_are_not_spilled(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("".join("z" * 120 + "\n" for _ in range(1000)))
    read = await h.text("read", {"file_path": "wide.txt"})
    assert estimate([{"type": "text", "text": read}]) > 12500
    assert "Omitted" not in read
    failed = await h.call("big", {"fail": True})
    assert text_of(failed) == "Error: " + "E" * 80000


async def test_failed_save_keeps_the_content(
    h: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(session_id: str, tool: str) -> Any:
        raise OSError("disk full")

    monkeypatch.setattr(spill, "open_spill", refuse)
    BODIES["unsaved"] = "u" * 60000
    assert await h.text("big", {"body": "unsaved"}) == BODIES["unsaved"]
    assert "could not save the full big result: disk full" in caplog.text


async def test_bash_seq_is_truncated_and_spilled(tmp_path: Path) -> None:
    rows = [
        ("tools", None),
        ("tool-bash", None),
        *POLICY[:2],
        ("permission", {"mode": "danger-full-access"}),
        ("spill-policy", {"maxInlineTokens": 12500}),
    ]
    world = await harness(tmp_path, rows, startup=True)
    try:
        out = await world.text("bash", {"description": "Count", "command": "seq 1 200000"})
        assert len(out.encode()) <= 50 * 1024
        assert "[output truncated; full output: " in out
        match = NOTICE.search(out)
        assert match is not None
        stored = Path(match.group(2)).read_text()
        truncated = re.search(r"\n200000\n\n\[output truncated; full output: (\S+)\]$", stored)
        assert truncated is not None
        assert Path(truncated.group(1)).read_text() == "".join(f"{i}\n" for i in range(1, 200001))
    finally:
        await world.close()


def test_spill_directories_older_than_a_week_are_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = tmp_path / "pydsh-spill-old"
    fresh = tmp_path / "pydsh-spill-fresh"
    other = tmp_path / "unrelated-old"
    for d in (old, fresh, other):
        d.mkdir()
    week_ago = os.stat(fresh).st_mtime - 8 * 24 * 3600
    os.utime(old, (week_ago, week_ago))
    os.utime(other, (week_ago, week_ago))
    monkeypatch.setattr(spill.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(spill, "_root", None)
    root = spill.spill_root()
    assert Path(root).parent == tmp_path
    assert not old.exists()
    assert fresh.exists()
    assert other.exists()


# -- repeat reminder -------------------------------------------------------------------------


async def test_reminders_at_the_third_and_fifth_identical_call(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    args = {"file_path": "a.txt", "limit": 5}
    contexts = [(await h.call("read", args)).additional_contexts for _ in range(5)]
    assert [len(c) for c in contexts] == [0, 0, 1, 0, 1]
    third = contexts[2][0]
    assert third["content"][0]["text"] == (
        "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous "
        "result before calling again: if the task is not complete, try a different approach or different "
        "arguments instead of repeating the call."
    )
    assert third["source"] == {"kind": "repeat-tool-reminder", "form": "notice", "summary": "read × 3"}
    fifth = contexts[4][0]
    assert fifth["content"][0]["text"] == (
        'Repeated tool call detected:\n- tool: read\n- consecutive_calls: 5\n- arguments: {"file_path":"a.txt",'
        '"limit":5}\nThe repeated calls are not making progress. Do not call this tool with these exact arguments '
        "again. Inspect the latest result and choose a different action, different arguments, or finish the task "
        "if enough evidence has been gathered."
    )
    assert fifth["source"]["summary"] == "read × 5"


async def test_key_order_does_not_matter_but_other_arguments_reset(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    await h.call("read", {"file_path": "a.txt", "limit": 5})
    await h.call("read", {"limit": 5, "file_path": "a.txt"})
    await h.call("read", {"file_path": "a.txt"})
    await h.call("read", {"file_path": "a.txt"})
    assert (await h.call("read", {"file_path": "a.txt"})).additional_contexts != []


async def test_failed_and_unknown_calls_count(h: Harness) -> None:
    outcomes = [await h.call("read", {}) for _ in range(3)]
    assert [len(o.additional_contexts) for o in outcomes] == [0, 0, 1]
    unknown = [await h.call("nope", {"x": 1}) for _ in range(3)]
    assert unknown[2].additional_contexts[0]["source"]["summary"] == "nope × 3"


async def test_a_user_message_resets_the_run(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    for _ in range(2):
        await h.call("read", {"file_path": "a.txt"})
    h.next_step()
    h.session.append("user/message", user_message("keep going", {"kind": "runtime-context"}), surface_op="append")
    assert (await h.call("read", {"file_path": "a.txt"})).additional_contexts != []
    h.next_step()
    h.session.append("user/message", user_message("try again"), surface_op="append")
    assert [len((await h.call("read", {"file_path": "a.txt"})).additional_contexts) for _ in range(3)] == [0, 0, 1]


async def test_long_arguments_are_previewed(h: Harness) -> None:
    BODIES["p" * 600] = "ok"
    outcomes = [await h.call("big", {"body": "p" * 600}) for _ in range(5)]
    text = outcomes[4].additional_contexts[0]["content"][0]["text"]
    canonical = '{"body":"' + "p" * 600 + '"}'
    assert f"- arguments: {canonical[:500]}… (+{len(canonical) - 500} more chars)\n" in text


async def test_include_and_exclude(tmp_path: Path) -> None:
    rows = [
        ("tools", None),
        ("tool-fs", None),
        ("repeat-tool-reminder", {"thresholds": [2], "include": ["re*"], "exclude": ["read"]}),
    ]
    world = await harness(tmp_path, rows)
    try:
        assert [len((await world.call("read", {})).additional_contexts) for _ in range(3)] == [0, 0, 0]
    finally:
        await world.close()
