"""Keyless adapters: compact scripts, cassette replay, overrides, fromRequest and session binding (spec 04 §8)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import Kernel, KernelError
from pydsh.kernel.cancel import AbortController
from pydsh.kernel.compose import Row
from pydsh.llm.keys import LLM, LLM_REPLAY
from pydsh.llm.scripted import ReplayAdapter, ScriptedAdapter, compile_entry, fill_from_request, load_cassette
from pydsh.llm.service import LlmService
from pydsh.llm.stream_records import BlockAssembler, expand_assistant_stream
from pydsh.llm.types import LlmError
from tests.conftest import FIXTURES

GOLDEN = FIXTURES / "recorded-tool-turn.jsonl"


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


def served(adapter: Any) -> LlmService:
    k = Kernel()
    svc = LlmService(k.ctx)
    svc.register_adapter(k.ctx, ["p"], adapter)
    return svc


def opts(session: str | None = "s1", **extra: Any) -> dict[str, Any]:
    return {"provider": "p", "model": "m", "messages": [], "sessionId": session, **extra}


# -- compact entries -------------------------------------------------------------------------


def test_text_entry_compiles_to_canonical_chunks_with_default_usage() -> None:
    entry = compile_entry({"text": "Hello"}, 1, input_chars=9)
    assert entry == {
        "kind": "chunks",
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "Hello"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
            {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ],
    }


def test_reasoning_text_and_tool_calls_compile_in_order() -> None:
    entry = compile_entry(
        {
            "text": "ok",
            "reasoning": "look first",
            "tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}],
        },
        2,
        chunk_size=4,
    )
    chunks = entry["chunks"]
    asm = BlockAssembler()
    for chunk in chunks:
        asm.add(chunk)
    assert asm.content() == [
        {"type": "reasoning", "text": "look first"},
        {"type": "text", "text": "ok"},
        {"type": "tool-call", "id": "call-2-1", "name": "read", "arguments": '{"file_path":"a.txt"}'},
    ]
    assert [c["text"] for c in chunks if c["type"] == "reasoning-delta"] == ["look", " fir", "st"]
    tool_deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert "name" in tool_deltas[0] and all("name" not in c for c in tool_deltas[1:])
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_stop_override_and_explicit_usage() -> None:
    entry = compile_entry({"text": "t", "stop": "max-tokens", "usage": {"inputTokens": 1, "outputTokens": 2}}, 1)
    assert entry["chunks"][-2:] == [
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}},
        {"type": "finish", "reason": {"kind": "max-tokens"}},
    ]


@pytest.mark.parametrize(
    "entry",
    [
        {"txt": "typo"},
        {"kind": "chunks", "chunks": [{"type": "text-delta", "index": 0}]},
        {"kind": "chunks", "chunks": [{"type": "usage", "usage": {}}]},
        {"kind": "throw", "message": "m"},
        {"kind": "hang", "extra": 1},
        {"error": {"code": "X"}},
        {"text": "t", "stop": "sideways"},
    ],
)
def test_invalid_entries_fail_when_a_script_loads(entry: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="llm-replay: script 1 entry 1"):
        ScriptedAdapter([entry])


async def test_error_entry_is_an_error_finish_and_throw_raises_after_prefix() -> None:
    svc = served(
        ScriptedAdapter(
            [
                {"error": {"code": "RATE_LIMIT", "message": "slow down", "status": 429}},
                {"text": "pre", "throw": {"code": "AUTH", "message": "bad key", "status": 401}},
            ]
        )
    )
    first = await collect(svc.stream(opts()))
    assert first == [
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "slow down", "code": "RATE_LIMIT", "status": 429}},
        }
    ]
    second = await collect(svc.stream(opts()))
    assert [c["type"] for c in second] == ["block-start", "text-delta", "block-end", "finish"]
    assert second[-1]["reason"] == {"kind": "error", "failure": {"message": "bad key", "code": "AUTH", "status": 401}}


async def test_hang_yields_partial_text_then_waits_for_abort(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    svc = served(ScriptedAdapter([{"hang": {"readyFile": str(ready)}}]))
    controller = AbortController()
    out: list[dict[str, Any]] = []

    async def consume() -> None:
        async for chunk in svc.stream(opts(signal=controller.signal)):
            out.append(chunk)

    task = asyncio.create_task(consume())
    while not ready.exists():
        await asyncio.sleep(0)
    assert [c["type"] for c in out] == ["block-start", "text-delta"]
    controller.abort({"kind": "user"})
    await task
    assert out[-1]["reason"]["kind"] == "aborted"
    assert out[-1]["reason"]["failure"]["code"] == "ABORTED"


# -- {{fromRequest:...}} ---------------------------------------------------------------------


def corpus_of(*texts: str) -> Any:
    return lambda: "\n".join(texts)


def test_from_request_uses_last_match_and_group_one() -> None:
    corpus = corpus_of("id=aaaa1 then id=bbbb2", "tail")
    assert fill_from_request("x{{fromRequest:id=(\\w+)}}y", corpus) == "xbbbb2y"
    assert fill_from_request({"a": ["{{fromRequest:t..l}}"]}, corpus) == {"a": ["tail"]}
    assert fill_from_request("{{fromRequest:[0-9a-f]{4}}}", corpus_of("xx beef 12ab")) == "12ab"


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("{{fromRequest:nothing-here}}", "matched nothing"),
        ("{{fromRequest:(}}", "is invalid"),
        ("{{fromRequest:abc}", "not terminated"),
    ],
)
def test_from_request_fails_loud(text: str, detail: str) -> None:
    with pytest.raises(LlmError, match=f"llm-replay: fromRequest .*{detail}"):
        fill_from_request(text, corpus_of("abc"))


async def test_from_request_fills_scripted_tool_arguments_from_the_request() -> None:
    svc = served(
        ScriptedAdapter([{"tool_calls": [{"name": "read", "arguments": {"file_path": "{{fromRequest:path (\\S+)}}"}}]}])
    )
    messages = [{"role": "user", "content": [{"type": "text", "text": "read path notes.md"}], "source": {}, "id": "u"}]
    out = await collect(svc.stream(opts(messages=messages)))
    end = next(c for c in out if c["type"] == "block-end")
    assert end["block"]["arguments"] == '{"file_path":"notes.md"}'


# -- binding ---------------------------------------------------------------------------------


async def test_sessions_bind_to_scripts_in_first_call_order_with_exact_errors() -> None:
    adapter = ScriptedAdapter([[{"text": "one"}], [{"text": "two"}, {"text": "three"}]])
    svc = served(adapter)

    async def text(session: str | None) -> str:
        out = await collect(svc.stream(opts(session)))
        if out[-1]["reason"]["kind"] == "error":
            return str(out[-1]["reason"]["failure"]["message"])
        return "".join(c["text"] for c in out if c["type"] == "text-delta")

    assert await text("b") == "one"
    assert await text("a") == "two"
    assert await text("a") == "three"
    assert await text(None) == (
        "llm-replay: a model call arrived from an unrecorded session (#3); the scenario recorded only 2 session(s)"
    )
    assert await text("b") == "llm-replay: script exhausted — session requested model call #2 but its script has only 1"
    adapter.assert_consumed()


def test_assert_consumed_names_unbound_and_unfinished_scripts() -> None:
    adapter = ScriptedAdapter([[{"text": "one"}, {"text": "two"}], [{"text": "x"}]])
    adapter._next("s", None)
    with pytest.raises(AssertionError) as info:
        adapter.assert_consumed()
    assert str(info.value) == (
        "llm-replay: fixture not fully consumed — script 1 consumed 1 of 2 model calls; "
        "script 2 was never bound to a session"
    )


# -- cassettes -------------------------------------------------------------------------------


def golden_assistant_streams() -> list[list[dict[str, Any]]]:
    rows = [json.loads(line) for line in GOLDEN.read_text().splitlines()[1:]]
    return [r["data"]["stream"] for r in rows if r["type"] == "assistant/message"]


async def test_golden_cassette_replays_its_recorded_chunks() -> None:
    adapter = ReplayAdapter(GOLDEN)
    svc = served(adapter)
    for records in golden_assistant_streams():
        out = await collect(svc.stream(opts()))
        assert out == [chunk for _t, chunk in expand_assistant_stream(records)]
    adapter.assert_consumed()


def write_log(path: Path, rows: list[dict[str, Any]], created_at: int = 1, sid: str = "s") -> Path:
    header = {
        "type": "session",
        "version": 4,
        "id": sid,
        "createdAt": created_at,
        "isSeeded": False,
        "delegationDepth": 0,
    }
    path.write_text("\n".join(json.dumps(r) for r in [header, *rows]) + "\n")
    return path


def stream_of(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "chunk", "time": 5, "chunk": c} for c in chunks]


ERROR_FINISH = {
    "type": "finish",
    "reason": {"kind": "error", "failure": {"message": "boom", "code": "SERVER", "status": 500}},
}
ABORT_FINISH = {"type": "finish", "reason": {"kind": "aborted", "failure": {"message": "x", "code": "ABORTED"}}}


def turn_rows(*body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "step/start", "data": {"turn": 1, "step": 1}},
        *body,
        {"type": "step/end", "data": {"turn": 1, "step": 1}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


def attempt(*chunks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant/attempt", "data": {"turn": 1, "step": 1, "stream": stream_of(*chunks)}}


def test_derivation_of_attempts_aborts_and_compaction(tmp_path: Path) -> None:
    rows = turn_rows(
        attempt(ERROR_FINISH),
        attempt({"type": "block-start", "index": 0, "blockType": "text"}, ABORT_FINISH),
        {"type": "compaction/start", "data": {"compactionId": "c", "turn": 1}},
        {
            "type": "compaction/summary",
            "data": {
                "compactionId": "c",
                "summary": [],
                "shadowedRange": {"start": 0, "end": 0},
                "shadowedSeqs": [],
                "shadowedTokenCount": 0,
                "provider": "p",
                "model": "m",
                "llmStreamCall": True,
                "rawOutput": [{"type": "text", "text": "sum"}],
            },
        },
        {
            "type": "session/title",
            "data": {"title": "T", "messageSeqs": [], "source": {"kind": "provider", "provider": "p"}},
        },
    )
    cassette = load_cassette(write_log(tmp_path / "a.jsonl", rows))
    assert [c.entry["kind"] for c in cassette.calls] == ["chunks", "hang", "chunks"]
    assert cassette.calls[0].entry["chunks"] == [ERROR_FINISH]
    assert cassette.calls[2].purpose == "compaction"
    assert cassette.calls[2].entry["chunks"] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "sum"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert cassette.title == "T"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            turn_rows(attempt({"type": "block-start", "index": 0, "blockType": "text"})),
            "model call 1 ended without a finish chunk",
        ),
        (
            turn_rows(
                {"type": "compaction/start", "data": {"compactionId": "c", "turn": 1}},
                {
                    "type": "compaction/summary",
                    "data": {"compactionId": "c", "llmStreamCall": True, "summary": [], "provider": "p", "model": "m"},
                },
            ),
            "without rawOutput",
        ),
        (
            [
                {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
                {"type": "step/start", "data": {"turn": 1, "step": 1}},
            ],
            "mixes projected and complete rows",
        ),
        ([{"type": "no/such-type", "data": {}}], "invalid cassette"),
    ],
)
def test_bad_cassettes_fail_loading(tmp_path: Path, rows: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_cassette(write_log(tmp_path / "bad.jsonl", rows))


async def test_session_title_calls_do_not_consume_the_script(tmp_path: Path) -> None:
    rows = [
        {
            "type": "session/title",
            "data": {"title": "Named", "messageSeqs": [], "source": {"kind": "provider", "provider": "p"}},
        },
        *turn_rows(attempt(ERROR_FINISH)),
    ]
    adapter = ReplayAdapter(write_log(tmp_path / "t.jsonl", rows))
    svc = served(adapter)
    title = await collect(svc.stream(opts(purpose="session-title")))
    assert "".join(c["text"] for c in title if c["type"] == "text-delta") == "Named"
    assert (await collect(svc.stream(opts())))[-1] == ERROR_FINISH
    adapter.assert_consumed()
    compaction = await collect(ServedOnce(tmp_path).stream(opts(purpose="compaction")))
    assert "was not recorded as one" in compaction[-1]["reason"]["failure"]["message"]


def ServedOnce(tmp_path: Path) -> LlmService:
    return served(ReplayAdapter(write_log(tmp_path / "o.jsonl", turn_rows(attempt(ERROR_FINISH)))))


async def test_child_cassettes_are_ordered_by_creation_time(tmp_path: Path) -> None:
    def text_call(text: str) -> dict[str, Any]:
        chunks = compile_entry({"text": text}, 1)["chunks"]
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "model"},
            "id": text,
        }
        return {
            "type": "assistant/message",
            "data": {"turn": 1, "step": 1, "message": message, "stream": stream_of(*chunks)},
            "surfaceOp": "append",
        }

    primary = write_log(tmp_path / "p.jsonl", turn_rows(text_call("primary")), created_at=10, sid="p")
    early = write_log(tmp_path / "c1.jsonl", turn_rows(text_call("early child")), created_at=5, sid="c1")
    tie = write_log(tmp_path / "c2.jsonl", turn_rows(text_call("tied child")), created_at=10, sid="c2")
    adapter = ReplayAdapter(primary, child_files=[str(tie), str(early)])
    svc = served(adapter)
    texts = []
    for session in ("x", "y", "z"):
        out = await collect(svc.stream(opts(session)))
        texts.append("".join(c["text"] for c in out if c["type"] == "text-delta"))
    assert texts == ["early child", "primary", "tied child"]


def test_override_replaces_or_patches_the_primary_script(tmp_path: Path) -> None:
    log = write_log(tmp_path / "p.jsonl", turn_rows(attempt(ERROR_FINISH)))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([{"text": "a"}, {"text": "b"}]))
    assert len(ReplayAdapter(log, override_file=bare).scripts[0]) == 2
    patches = tmp_path / "patches.json"
    patches.write_text(json.dumps({"patches": [{"at": 0, "entry": {"text": "x"}}, {"at": 1, "entry": {"hang": True}}]}))
    script = ReplayAdapter(log, override_file=patches).scripts[0]
    assert [c.entry for c in script] == [{"text": "x"}, {"hang": True}]
    duplicate = tmp_path / "dup.json"
    duplicate.write_text(
        json.dumps({"patches": [{"at": 0, "entry": {"text": "x"}}, {"at": 0, "entry": {"text": "y"}}]})
    )
    with pytest.raises(ValueError) as info:
        ReplayAdapter(log, override_file=duplicate)
    assert str(info.value) == f"llm-replay: invalid override {duplicate}: patches[1].at duplicates call index 0"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"text": "ok"}, {"kind": "chunks", "chunks": []}]))
    with pytest.raises(ValueError, match=r"llm-replay: invalid override .*broken.json: \[1\] "):
        ReplayAdapter(log, override_file=broken)


# -- plugin ----------------------------------------------------------------------------------

POLICY = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}}


async def load(config: dict[str, Any]) -> Kernel:
    k = Kernel()
    await k.load([Row(id="llm", name="llm"), Row(id="llm-replay", name="llm-replay", config=config)])
    return k


async def test_plugin_registers_catalog_routes_with_plain_header_config() -> None:
    config = {
        "scripts": [{"text": "hi"}],
        "providers": [
            {
                "id": "deepseek-official",
                "name": "Replay",
                "retryPolicy": POLICY,
                "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000}],
            }
        ],
    }
    k = await load(config)
    llm = k.ctx.require(LLM)
    prepared = await llm.prepare_call({"provider": "deepseek-official", "model": "deepseek-v4-flash"})
    assert prepared.config == {"provider": "deepseek-official", "model": "deepseek-v4-flash"}
    assert prepared.adapter_defaults == {}
    assert prepared.context_window == 128000
    assert prepared.retry_policy == {
        "mode": "normal",
        "maxRetries": 5,
        "retryableCodes": ["EMPTY_RESPONSE", "RATE_LIMIT", "SERVER", "TIMEOUT", "TRANSPORT"],
        "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0},
    }
    out = await collect(prepared.stream({**prepared.config, "messages": [], "sessionId": "s"}))
    assert out[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    k.ctx.require(LLM_REPLAY).assert_consumed()
    await k.dispose()
    assert not llm.has_adapter("deepseek-official")


async def test_plugin_without_catalog_serves_every_route_through_llm_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SNAPSHOT_FILE", str(GOLDEN))
    k = await load({})
    llm = k.ctx.require(LLM)
    with pytest.raises(LlmError) as info:
        await llm.prepare_call({"provider": "deepseek-official", "model": "deepseek-v4-flash"})
    assert info.value.code == "NO_ADAPTER"
    out = await collect(llm.stream({"provider": "anything", "model": "m", "messages": [], "sessionId": "s"}))
    assert out[-1]["reason"]["kind"] == "tool-calls"


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        (
            {"scripts": [], "providers": [{"id": "p", "retryPolicy": {"mode": "normal", "bogus": 1}}]},
            "providers.0.retryPolicy.bogus",
        ),
        ({"scripts": [], "paceMs": -1}, "paceMs"),
        ({"scripts": [], "extra": True}, "extra"),
    ],
)
async def test_plugin_config_errors_name_the_key(config: dict[str, Any], detail: str) -> None:
    k = await load(config)
    failed = k.loader.failures
    assert len(failed) == 1 and isinstance(failed[0].error, KernelError)
    assert detail in str(failed[0].error)
