"""The ``llm`` service: registry, config materialisation, prepared calls and the stream normaliser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.cancel import AbortController
from pydsh.kernel.compose import Row
from pydsh.llm.hooks import ADAPTERS_UPDATED, LLM_STREAM
from pydsh.llm.keys import LLM
from pydsh.llm.service import LlmService
from pydsh.llm.types import LlmError, ModelInfo
from pydsh.session.events import freeze


class FakeAdapter:
    """Yields a canned chunk list (or raises) and records what it was asked."""

    def __init__(self, chunks: list[Any] | None = None, *, raise_after: BaseException | None = None) -> None:
        self.chunks = chunks or []
        self.raise_after = raise_after
        self.seen: list[dict[str, Any]] = []
        self.closed = False

    def provider_info(self, provider: str) -> dict[str, str]:
        return {"id": provider, "name": "Fake"}

    def provider_retry_policy(self, provider: str) -> dict[str, Any]:
        return {"mode": "normal"}

    async def resolve_model(self, provider: str, model: str) -> ModelInfo:
        info: ModelInfo = {"provider": provider, "id": model, "name": model, "context": {"contextWindow": 1000}}
        if model == "reasoner":
            info["defaultMaxTokens"] = 256
            info["reasoning"] = {"efforts": [{"id": "off", "name": "Off"}, {"id": "high", "name": "High"}]}
            info["reasoning"]["defaultEffort"] = "high"
            info["systemPromptUpdate"] = "in-history"
        return info

    async def stream(self, options: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        self.seen.append(options)
        try:
            for chunk in self.chunks:
                yield chunk
            if self.raise_after is not None:
                raise self.raise_after
        finally:
            self.closed = True


def service() -> tuple[Kernel, LlmService]:
    k = Kernel()
    svc = LlmService(k.ctx)
    return k, svc


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


TEXT = [
    {"type": "block-start", "index": 7, "blockType": "text"},
    {"type": "text-delta", "index": 7, "text": "hi"},
    {"type": "block-end", "index": 7, "block": {"type": "text", "text": "hi"}},
    {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


async def test_duplicate_route_fails_with_exact_text_and_disposer_unregisters() -> None:
    k, svc = service()
    updates: list[Any] = []
    k.ctx.on(ADAPTERS_UPDATED, updates.append)
    d = svc.register_adapter(k.ctx, ["a", "b"], FakeAdapter())
    with pytest.raises(LlmError) as info:
        svc.register_adapter(k.ctx, ["b"], FakeAdapter())
    assert str(info.value) == 'an adapter for provider "b" is already registered'
    assert info.value.code == "DUPLICATE_ADAPTER"
    assert svc.has_adapter("a") and [p["id"] for p in svc.list_providers()] == ["a", "b"]
    d()
    assert not svc.has_adapter("a")
    assert updates == [{"providers": ["a", "b"]}, {"providers": []}]


async def test_registration_unwinds_with_the_registering_fiber() -> None:
    k, svc = service()
    k.ctx.provide(LLM, svc)
    rows = [Row(id="reg", name="tests.llm.test_service:register_plugin")]
    await k.load(rows)
    assert svc.has_adapter("plug")
    fiber = k.fiber.children[0]
    await k.loader.dispose(fiber)
    assert not svc.has_adapter("plug")


class register_plugin:
    inject = (LLM,)

    def __init__(self, ctx: Any, config: Any) -> None:
        ctx.require(LLM).register_adapter(ctx, ["plug"], FakeAdapter())


async def test_unknown_route_is_no_adapter() -> None:
    _k, svc = service()
    with pytest.raises(LlmError) as info:
        await svc.prepare_call({"provider": "nope", "model": "m"})
    assert (str(info.value), info.value.code) == ('no adapter registered for provider "nope"', "NO_ADAPTER")
    with pytest.raises(LlmError):
        await svc.resolve_model_info("nope", "m")


async def test_prepare_call_materialises_defaults_in_header_order() -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["p"], FakeAdapter())
    prepared = await svc.prepare_call({"provider": "p", "model": "reasoner"})
    assert list(prepared.config.items()) == [
        ("provider", "p"),
        ("model", "reasoner"),
        ("maxTokens", 256),
        ("reasoningEffort", "high"),
    ]
    assert list(prepared.adapter_defaults.items()) == [("reasoningEffort", True), ("maxTokens", True)]
    assert prepared.context_window == 1000
    assert prepared.retry_policy == {"mode": "normal"}
    assert prepared.system_prompt_update == "in-history"
    assert prepared.tool_update is None
    explicit = await svc.prepare_call({"provider": "p", "model": "reasoner", "reasoningEffort": "off", "maxTokens": 9})
    assert explicit.adapter_defaults == {}
    plain = await svc.prepare_call({"provider": "p", "model": "plain"})
    assert plain.config == {"provider": "p", "model": "plain"} and plain.adapter_defaults == {}


@pytest.mark.parametrize(("model", "effort"), [("reasoner", "max"), ("plain", "high")])
async def test_unsupported_effort_fails_before_io(model: str, effort: str) -> None:
    k, svc = service()
    adapter = FakeAdapter(TEXT)
    svc.register_adapter(k.ctx, ["p"], adapter)
    with pytest.raises(LlmError) as info:
        await svc.resolve_call_config({"provider": "p", "model": model, "reasoningEffort": effort})
    assert str(info.value) == f'provider "p" model "{model}" does not support reasoning effort "{effort}"'
    assert info.value.code == "UNSUPPORTED_REASONING_EFFORT"
    assert adapter.seen == []


async def test_prepared_call_streams_once_with_its_own_config() -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["p"], FakeAdapter(TEXT))
    prepared = await svc.prepare_call({"provider": "p", "model": "m"})
    with pytest.raises(LlmError) as info:
        prepared.stream({"provider": "p", "model": "other", "messages": []})
    assert info.value.code == "INVALID_PREPARED_CALL"
    chunks = await collect(prepared.stream({**prepared.config, "messages": []}))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    with pytest.raises(LlmError):
        prepared.stream({**prepared.config, "messages": []})


async def test_normaliser_renumbers_indexes_in_first_seen_order() -> None:
    k, svc = service()
    chunks = [
        {"type": "text-delta", "index": 5, "text": "a"},
        {"type": "reasoning-delta", "index": 2, "text": "b"},
        {"type": "text-delta", "index": 5, "text": "c"},
        {"type": "finish", "reason": {"kind": "stop"}},
        {"type": "text-delta", "index": 5, "text": "after finish"},
    ]
    adapter = FakeAdapter(chunks)
    svc.register_adapter(k.ctx, ["p"], adapter)
    out = await collect(svc.stream({"provider": "p", "model": "m", "messages": []}))
    assert [(c["type"], c.get("index")) for c in out] == [
        ("text-delta", 0),
        ("reasoning-delta", 1),
        ("text-delta", 0),
        ("finish", None),
    ]
    assert adapter.closed


@pytest.mark.parametrize(
    ("chunks", "raised", "failure"),
    [
        ([{"type": "finish", "reason": {"kind": "stop"}}], None, {"code": "EMPTY_RESPONSE"}),
        ([], None, {"code": "EMPTY_RESPONSE"}),
        (TEXT[:2], LlmError("boom", "SERVER", status=500), {"message": "boom", "code": "SERVER", "status": 500}),
        ([], RuntimeError("kaput"), {"message": "kaput", "code": "UNKNOWN"}),
        ([{"type": "weird"}], None, {"code": "MALFORMED_RESPONSE"}),
    ],
)
async def test_failures_become_one_error_finish(chunks: list[Any], raised: Exception | None, failure: Any) -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["p"], FakeAdapter(chunks, raise_after=raised))
    out = await collect(svc.stream({"provider": "p", "model": "m", "messages": []}))
    finishes = [c for c in out if c["type"] == "finish"]
    assert finishes == [out[-1]]
    assert out[-1]["reason"]["kind"] == "error"
    assert failure.items() <= out[-1]["reason"]["failure"].items()


async def test_abort_becomes_aborted_finish() -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["p"], FakeAdapter(TEXT[:2], raise_after=LlmError("x", "TRANSPORT")))
    controller = AbortController()
    controller.abort({"kind": "user"})
    out = await collect(svc.stream({"provider": "p", "model": "m", "messages": [], "signal": controller.signal}))
    assert out == [
        {"type": "finish", "reason": {"kind": "aborted", "failure": {"message": "request aborted", "code": "ABORTED"}}}
    ]
    svc2 = LlmService(k.ctx)
    svc2.register_adapter(k.ctx, ["p"], FakeAdapter([], raise_after=LlmError("gone", "ABORTED")))
    out = await collect(svc2.stream({"provider": "p", "model": "m", "messages": []}))
    assert out[-1]["reason"] == {"kind": "aborted", "failure": {"message": "gone", "code": "ABORTED"}}


async def test_cancellation_propagates() -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["p"], FakeAdapter([], raise_after=asyncio.CancelledError()))
    with pytest.raises(asyncio.CancelledError):
        await collect(svc.stream({"provider": "p", "model": "m", "messages": []}))


async def test_unrouted_stream_without_listener_is_no_adapter_finish() -> None:
    _k, svc = service()
    out = await collect(svc.stream({"provider": "ghost", "model": "m", "messages": []}))
    assert out == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {"message": 'no adapter registered for provider "ghost"', "code": "NO_ADAPTER"},
            },
        }
    ]


async def test_llm_stream_listener_serves_and_wraps_routes() -> None:
    k, svc = service()
    adapter = FakeAdapter(TEXT)
    svc.register_adapter(k.ctx, ["p"], adapter)
    seen: list[str] = []

    async def listener(options: dict[str, Any], next: Any) -> AsyncIterator[dict[str, Any]]:
        seen.append(options["provider"])
        if options["provider"] == "p":
            return await next()  # type: ignore[no-any-return]

        async def served() -> AsyncIterator[dict[str, Any]]:
            for chunk in TEXT:
                yield chunk

        return served()

    k.ctx.on(LLM_STREAM, listener)
    routed = await collect(svc.stream({"provider": "p", "model": "m", "messages": []}))
    served = await collect(svc.stream({"provider": "elsewhere", "model": "m", "messages": []}))
    assert routed == served
    assert [c["index"] for c in routed if "index" in c] == [0, 0, 0]
    assert seen == ["p", "elsewhere"] and len(adapter.seen) == 1


async def test_replay_state_is_gated_per_adapter_instance() -> None:
    k, svc = service()
    mine, other = FakeAdapter(TEXT), FakeAdapter(TEXT)
    svc.register_adapter(k.ctx, ["p", "p2"], mine)
    svc.register_adapter(k.ctx, ["q"], other)

    def assistant(provider: str) -> dict[str, Any]:
        source = {"kind": "model", "provider": provider, "model": "m", "replayState": {"response": {}}}
        return {"role": "assistant", "content": [], "source": source, "id": provider}

    messages = [assistant("p2"), assistant("q"), assistant("gone")]
    await collect(svc.stream({"provider": "p", "model": "m", "messages": messages}))
    sent = mine.seen[0]["messages"]
    assert ["replayState" in m["source"] for m in sent] == [True, False, False]
    assert all("replayState" in m["source"] for m in messages)


async def test_replay_state_checked_at_an_earlier_step_is_checked_again_once_the_routes_change() -> None:
    """Each step checks only the logged messages it adds; a route that changes still gates the earlier ones."""
    k, svc = service()
    mine, other = FakeAdapter(TEXT), FakeAdapter(TEXT)
    svc.register_adapter(k.ctx, ["p"], mine)
    remove_q = svc.register_adapter(k.ctx, ["q"], mine)
    source = {"kind": "model", "provider": "q", "model": "m", "replayState": {"response": {}}}
    first = [freeze({"role": "assistant", "content": [], "source": source, "id": "a1"})]
    second = [*first, freeze({"role": "user", "content": [], "id": "u2"})]
    third = [*second, freeze({"role": "user", "content": [], "id": "u3"})]
    for messages in (first, second):
        await collect(svc.stream({"provider": "p", "model": "m", "messages": messages, "sessionId": "s"}))
    remove_q()
    svc.register_adapter(k.ctx, ["q"], other)
    await collect(svc.stream({"provider": "p", "model": "m", "messages": third, "sessionId": "s"}))
    kept = [["replayState" in m.get("source", {}) for m in call["messages"]] for call in mine.seen]
    assert kept == [[True], [True, False], [False, False, False]]


async def test_llm_plugin_provides_the_service() -> None:
    k = Kernel()
    await k.load([Row(id="llm", name="llm")])
    assert isinstance(k.ctx.get(LLM), LlmService)


class Listing(FakeAdapter):
    """A route whose catalog lists one model, or fails."""

    def __init__(self, fails: bool) -> None:
        super().__init__()
        self.fails = fails

    async def list_models(self, provider: str) -> list[ModelInfo]:
        if self.fails:
            raise OSError("catalog unreachable")
        return [{"provider": provider, "id": "m1", "name": "M1"}]


async def test_catalogs_list_every_route_and_a_failing_catalog_as_empty(caplog: pytest.LogCaptureFixture) -> None:
    k, svc = service()
    svc.register_adapter(k.ctx, ["good"], Listing(fails=False))
    svc.register_adapter(k.ctx, ["down"], Listing(fails=True))
    catalogs = {info["id"]: [m["id"] for m in models] for info, models in await svc.catalogs()}
    assert catalogs == {"good": ["m1"], "down": []}
    assert "listing the models of provider down failed" in caplog.text
