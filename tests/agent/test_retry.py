"""The ``llm-retry`` policy: logged records, budgets per step, delays, abort and config (spec 04 §7)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from pydsh.agent.hooks import REQUEST_ERROR
from pydsh.agent.retry import RETRY_STATE, RetryHandler, policy_key
from pydsh.kernel import Kernel
from pydsh.kernel.cancel import AbortController
from pydsh.kernel.compose import Row
from pydsh.llm.deepseek import Config as DeepSeekConfig
from pydsh.llm.deepseek import DeepSeekAdapter
from pydsh.llm.retry import RetryPolicyConfig
from pydsh.llm.service import LlmService
from pydsh.llm.stream_records import AssistantStreamAccumulator, BlockAssembler
from pydsh.session.events import make_header
from pydsh.session.log import Session
from pydsh.testing.mock_model_server import MockModelServer

USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u1"}]
FAST = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}}


@dataclass
class FakeAgent:
    session: Session


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def open_session() -> Session:
    session = Session(make_header("s", 1, cwd="/w"))
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    return session


def kernel_with(handler: RetryHandler) -> Kernel:
    k = Kernel()
    k.ctx.on(REQUEST_ERROR, handler)
    return k


async def run_step(
    k: Kernel, svc: LlmService, session: Session, policy: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A minimal step: attempt, log, ask agent/request-error, repeat; returns the final finish reason."""
    agent = FakeAgent(session)
    while True:
        prepared = await svc.prepare_call({"provider": "deepseek-official", "model": "deepseek-v4-flash"})
        acc, asm = AssistantStreamAccumulator(), BlockAssembler()
        options = {**prepared.config, "messages": USER, "sessionId": session.id}
        async for chunk in prepared.stream(options):
            acc.add(chunk, 1)
            asm.add(chunk)
        if asm.finish["kind"] not in ("error", "aborted"):
            message = {"role": "assistant", "content": asm.content(), "source": {"kind": "model"}, "id": "a"}
            session.append(
                "assistant/message",
                {"turn": 1, "step": 1, "message": message, "stream": acc.records()},
                surface_op="append",
            )
            return asm.finish
        session.append("assistant/attempt", {"turn": 1, "step": 1, "stream": acc.records()})
        payload = {
            "agent": agent,
            "turn": 1,
            "step": 1,
            "provider": "deepseek-official",
            "failure": asm.finish["failure"],
            "retryPolicy": policy if policy is not None else prepared.retry_policy,
            "signal": None,
        }
        answer = await k.ctx.waterfall(REQUEST_ERROR, payload, lambda: None)
        if answer != {"kind": "retry"}:
            return asm.finish


def types_of(session: Session) -> list[str]:
    return [
        e["type"]
        for e in session.events
        if e["type"] in ("assistant/attempt", "assistant/message", "llm/retry", "llm/retry-started")
    ]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")


async def served(server: MockModelServer, handler: RetryHandler) -> tuple[Kernel, LlmService, DeepSeekAdapter]:
    k = kernel_with(handler)
    svc = LlmService(k.ctx)
    adapter = DeepSeekAdapter(DeepSeekConfig(), base_url=server.base_url)
    svc.register_adapter(k.ctx, ["deepseek-official"], adapter)
    return k, svc, adapter


async def test_500_429_empty_then_success_retries_in_one_step() -> None:
    sleeps = Sleeps()
    handler = RetryHandler(random=lambda: 0.5, sleep=sleeps)
    session = open_session()
    async with MockModelServer(["server_error", "rate_limit", "empty", "success"]) as server:
        k, svc, adapter = await served(server, handler)
        finish = await run_step(k, svc, session)
        await adapter.aclose()
    assert finish["kind"] == "stop"
    assert types_of(session) == [
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "assistant/message",
    ]
    retries = [e["data"] for e in session.events if e["type"] == "llm/retry"]
    assert [r["retry"] for r in retries] == [1, 2, 3]
    assert len({r["retryId"] for r in retries}) == 1
    assert [r["failure"]["code"] for r in retries] == ["SERVER", "RATE_LIMIT", "EMPTY_RESPONSE"]
    assert retries[0]["failure"] == {"message": "mock server error", "code": "SERVER", "status": 500}
    assert retries[2]["failure"] == {"message": "DeepSeek Messages returned no content", "code": "EMPTY_RESPONSE"}
    assert [r["delayMs"] for r in retries] == [500, 1000, 2000]
    assert sleeps.calls == [0.5, 1.0, 2.0]
    first = retries[0]
    assert list(first) == [
        "retryId",
        "turn",
        "step",
        "provider",
        "mode",
        "policyKey",
        "retry",
        "maxRetries",
        "delayMs",
        "failure",
    ]
    assert (
        first["policyKey"]
        == '["normal",5,["EMPTY_RESPONSE","RATE_LIMIT","SERVER","TIMEOUT","TRANSPORT"],500,10000,0.1]'
    )
    started = [e["data"] for e in session.events if e["type"] == "llm/retry-started"]
    assert started[0] == {"retryId": first["retryId"], "turn": 1, "step": 1, "retry": 1}
    assert {e["data"]["step"] for e in session.events if "step" in e["data"]} == {1}


async def test_six_server_errors_give_up_after_five_retries() -> None:
    session = open_session()
    async with MockModelServer(["server_error"] * 6) as server:
        k, svc, adapter = await served(server, RetryHandler(random=lambda: 0.5, sleep=Sleeps()))
        finish = await run_step(k, svc, session, FAST)
        await adapter.aclose()
    assert finish["failure"]["code"] == "SERVER"
    assert types_of(session).count("assistant/attempt") == 6
    assert [e["data"]["retry"] for e in session.events if e["type"] == "llm/retry"] == [1, 2, 3, 4, 5]


async def test_auth_error_is_not_retried() -> None:
    session = open_session()
    async with MockModelServer(["auth_error", "success"]) as server:
        k, svc, adapter = await served(server, RetryHandler(sleep=Sleeps()))
        finish = await run_step(k, svc, session)
        await adapter.aclose()
    assert finish["failure"]["code"] == "AUTH"
    assert types_of(session) == ["assistant/attempt"]


def payload(
    session: Session, failure: dict[str, Any], policy: dict[str, Any] | None, signal: Any = None
) -> dict[str, Any]:
    return {
        "agent": FakeAgent(session),
        "turn": 1,
        "step": 1,
        "provider": "p",
        "failure": failure,
        "retryPolicy": policy,
        "signal": signal,
    }


async def no_answer() -> None:
    return None


SERVER = {"message": "boom", "code": "SERVER", "status": 500}


async def test_retry_after_is_used_verbatim_or_ends_a_normal_policy() -> None:
    session = open_session()
    handler = RetryHandler(random=lambda: 1.0, sleep=Sleeps())
    policy = RetryPolicyConfig().policy()
    assert await handler(payload(session, {**SERVER, "providerRetryAfterMs": 750}, policy), no_answer) == {
        "kind": "retry"
    }
    assert session.events[-2]["data"]["delayMs"] == 750
    assert await handler(payload(session, {**SERVER, "providerRetryAfterMs": 20000}, policy), no_answer) is None
    always = RetryPolicyConfig(mode="always").policy()
    assert await handler(payload(session, {**SERVER, "providerRetryAfterMs": 20000}, always), no_answer) == {
        "kind": "retry"
    }
    record = session.events[-2]["data"]
    assert record["mode"] == "always" and "maxRetries" not in record
    assert record["delayMs"] == pytest.approx(550.0)


async def test_always_mode_asks_other_recoverers_first_and_retries_any_code() -> None:
    session = open_session()
    handler = RetryHandler(random=lambda: 0.0, sleep=Sleeps())
    always = {"mode": "always", "backoff": {"initialDelayMs": 100, "maxDelayMs": 1000, "jitterRatio": 0.5}}

    async def compaction() -> dict[str, str]:
        return {"kind": "retry", "by": "compaction"}

    assert await handler(payload(session, {"message": "x", "code": "AUTH"}, always), compaction) == {
        "kind": "retry",
        "by": "compaction",
    }
    assert await handler(payload(session, {"message": "x", "code": "AUTH"}, always), no_answer) == {"kind": "retry"}
    assert session.events[-2]["data"]["delayMs"] == 50
    assert session.events[-2]["data"]["policyKey"] == '["always",100,1000,0.5]'


async def test_abort_during_the_wait_returns_none_without_retry_started() -> None:
    session = open_session()
    controller = AbortController()

    async def sleep_until_aborted(seconds: float) -> None:
        controller.abort({"kind": "user"})
        await asyncio.sleep(3600)

    handler = RetryHandler(sleep=sleep_until_aborted)
    answer = await handler(payload(session, SERVER, RetryPolicyConfig().policy(), controller.signal), no_answer)
    assert answer is None
    assert [e["type"] for e in session.events][-1] == "llm/retry"


async def test_budget_resets_per_step_and_folds_from_the_log() -> None:
    session = open_session()
    handler = RetryHandler(sleep=Sleeps())
    policy = {"mode": "normal", "maxRetries": 1}
    assert await handler(payload(session, SERVER, policy), no_answer) == {"kind": "retry"}
    assert await handler(payload(session, SERVER, policy), no_answer) is None
    resumed = Session(session.header, session.events)
    assert resumed.fold(RETRY_STATE) == session.fold(RETRY_STATE) != {}
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    assert session.fold(RETRY_STATE) == {}
    assert await handler(payload(session, SERVER, policy), no_answer) == {"kind": "retry"}


async def test_no_policy_passes_through() -> None:
    session = open_session()
    assert await RetryHandler()(payload(session, SERVER, None), no_answer) is None
    assert types_of(session) == []


def test_policy_key_and_validation() -> None:
    assert policy_key(RetryPolicyConfig(mode="always")) == '["always",500,10000,0.1]'
    for bad in (
        {"mode": "normal", "extra": 1},
        {"retryableCodes": []},
        {"backoff": {"initialDelayMs": 5, "maxDelayMs": 1}},
    ):
        with pytest.raises(ValueError):
            RetryPolicyConfig.model_validate(bad)


async def test_plugin_rejects_a_retry_policy_on_itself() -> None:
    k = Kernel()
    await k.load([Row(id="llm-retry", name="llm-retry", config={"retryPolicy": {"mode": "normal"}})])
    assert "llm-retry: retryPolicy belongs under each provider configuration" in str(k.loader.failures[0].error)
    ok = Kernel()
    await ok.load([Row(id="llm-retry", name="llm-retry")])
    assert ok.ctx.has_listeners(REQUEST_ERROR)
