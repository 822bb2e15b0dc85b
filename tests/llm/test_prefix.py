"""The adapters' converted-history prefixes: each logged message is converted once, the bytes never change.

Every body built from a kept prefix is compared with the body a fresh adapter (nothing kept) builds
from the same options, through a growing history, a rewritten one (compaction), a plain message that
changes between requests, a switch of model and a request without a session.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pydsh.llm import http
from pydsh.llm.deepseek import Config, DeepSeekAdapter, MessagesRequest
from pydsh.llm.openai_compat import ChatHistory, OpenAICompatAdapter, ProviderConfig
from pydsh.llm.prefix import PrefixCache, frozen_run
from pydsh.llm.types import LlmError
from pydsh.session.events import snapshot
from tests.llm.test_deepseek import MODEL, assistant, call, text, tool_result

ADAPTERS = ("deepseek", "openai")


def step(n: int) -> list[dict[str, Any]]:
    """One read step of the log: the call (with reasoning the model signed) and its result, frozen."""
    reasoning = {"type": "reasoning", "text": f"thinking {n}"}
    called = assistant(reasoning, call(f"c{n}"), replay_model=MODEL, mid=f"a{n}")
    return [snapshot(called), snapshot(tool_result(f"c{n}", f"line {n}"))]


def opening() -> list[dict[str, Any]]:
    return [snapshot(text("system", "You are terse.", "s")), snapshot(text("user", "read it", "u"))]


class Route:
    """One adapter under test and the way to get its body bytes, fresh or from what it kept."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.adapter = self.make()

    def make(self) -> Any:
        if self.kind == "deepseek":
            return DeepSeekAdapter(Config())
        return OpenAICompatAdapter([ProviderConfig(id="r", baseURL="http://mock.invalid", dialect="deepseek")])

    async def body(self, adapter: Any, options: dict[str, Any]) -> bytes:
        """The body's bytes, asserted equal to a plain encoding of the whole body (no JSON kept from earlier)."""
        if self.kind == "deepseek":
            body, _changes = await adapter.build_body(options)
        else:
            body = adapter.build_body(options, adapter.route("r"))
        encoded = http.encode_body(body)
        assert encoded == json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return encoded

    async def check(self, messages: list[dict[str, Any]], model: str = MODEL, **extra: Any) -> bytes:
        """The kept path's bytes, asserted equal to a fresh adapter's."""
        options = {"provider": "r", "model": model, "messages": messages, "sessionId": "s1", **extra}
        kept = await self.body(self.adapter, options)
        assert kept == await self.body(self.make(), options)
        return kept


@pytest.fixture
def added(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every message either adapter converts, in order."""
    seen: list[dict[str, Any]] = []
    for kind in (MessagesRequest, ChatHistory):
        original = kind.add

        def add(self: Any, message: dict[str, Any], original: Any = original) -> None:
            seen.append(message)
            original(self, message)

        monkeypatch.setattr(kind, "add", add)
    return seen


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_growing_history_converts_only_the_new_messages(kind: str, added: list[dict[str, Any]]) -> None:
    route = Route(kind)
    history = opening()
    for n in range(1, 6):
        history = [*history, *step(n)]
        added.clear()
        options = {"provider": "r", "model": MODEL, "messages": list(history), "sessionId": "s1"}
        await route.body(route.adapter, options)
        assert added == (history if n == 1 else history[-2:])
        await route.check(list(history))


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_rewritten_history_is_converted_from_its_start(kind: str) -> None:
    route = Route(kind)
    history = [*opening(), *step(1), *step(2)]
    before = await route.check(history)
    summary = snapshot(text("user", "<compacted-summary>read twice</compacted-summary>", "k"))
    after = await route.check([history[0], summary, *step(3)])
    assert b"compacted-summary" in after and b"thinking 1" in before and b"thinking 1" not in after


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_plain_message_is_converted_again_each_time(kind: str) -> None:
    route = Route(kind)
    history = [*opening(), *step(1)]
    plain = text("user", "first words", "p")
    await route.check([*history, plain])
    plain["content"] = [{"type": "text", "text": "second words"}]
    again = await route.check([*history, plain, *step(2)])
    assert b"second words" in again and b"first words" not in again


async def test_signatures_follow_the_model_of_each_request() -> None:
    route = Route("deepseek")
    history = [*opening(), *step(1)]
    signed = await route.check(history)
    other = await route.check([*history, *step(2)], model="deepseek-v4-pro")
    assert b"sig-a1" in signed and b"sig-a1" not in other


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_requests_without_a_session_keep_nothing(kind: str, added: list[dict[str, Any]]) -> None:
    route = Route(kind)
    history = [*opening(), *step(1)]
    for messages in (history, [*history, *step(2)]):
        added.clear()
        await route.body(route.adapter, {"provider": "r", "model": MODEL, "messages": messages})
        assert added == messages


def test_prefixes_resume_by_identity_and_the_least_recent_go_first() -> None:
    cache: PrefixCache[str] = PrefixCache(limit=4)
    a, b = snapshot({"role": "user", "content": []}), snapshot({"role": "user", "content": []})
    cache.store("one", [a, b], "after a, b")
    assert cache.resume("one", [a, b, a]) == (2, "after a, b")
    assert cache.resume("one", [a, snapshot({"role": "user", "content": []})]) is None
    assert cache.resume("one", [a]) is None
    cache.store("two", [b, a], "after b, a")
    cache.resume("one", [a, b])
    cache.store("three", [a], "after a")
    assert cache.resume("two", [b, a]) is None
    assert cache.resume("one", [a, b]) == (2, "after a, b")


def test_the_frozen_run_stops_at_a_plain_message() -> None:
    frozen = snapshot({"role": "user", "content": []})
    messages = [frozen, frozen, {"role": "user", "content": []}, frozen]
    assert frozen_run(messages, 0) == 2
    assert frozen_run(messages, 3) == 4


async def test_a_later_conversion_error_still_comes_before_an_earlier_pairing_error() -> None:
    """Tool pairing is checked as messages settle, but reported at the end, as when it ran over the whole wire."""
    unanswered = snapshot(assistant(call("c1"), mid="a1"))
    strange = snapshot(assistant({"type": "image", "attachment": "x"}, mid="a2"))
    with pytest.raises(LlmError) as info:
        await Route("deepseek").check([*opening(), unanswered, snapshot(text("user", "next", "u2")), strange])
    assert info.value.code == "UNSUPPORTED_CONTENT"
    with pytest.raises(LlmError) as info:
        await Route("deepseek").check([*opening(), unanswered, snapshot(text("user", "next", "u2"))])
    assert str(info.value).endswith("tool calls need immediate results")


def tool_list(description: str) -> list[dict[str, Any]]:
    return snapshot([{"name": "read", "description": description, "parameters": {"type": "object"}}])


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_session_tool_list_is_encoded_once_while_it_stays_the_same(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded: list[Any] = []
    real = http.encoded
    monkeypatch.setattr(http, "encoded", lambda items: encoded.append(items) or real(items))
    route, history, tools = Route(kind), [*opening(), *step(1)], tool_list("Reads a file.")
    await route.check(history, tools=tools)
    encoded.clear()
    await route.check([*history, *step(2)], tools=tools)
    assert len(encoded) == 1
    changed = await route.check([*history, *step(2)], tools=tool_list("Reads a file, page by page."))
    assert b"page by page" in changed
