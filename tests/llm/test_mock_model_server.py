"""The loopback mock: routing, key check, exhaustion, repeat/random, scripted entries and the CLI (spec 04 §9)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from pydsh.llm.deepseek import Config, DeepSeekAdapter
from pydsh.llm.openai_compat import OpenAICompatAdapter, ProviderConfig
from pydsh.llm.stream_records import BlockAssembler
from pydsh.testing.mock_model_server import MockModelServer

USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "id": "u"}]


async def collect(it: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c async for c in it]


async def test_wrong_route_bad_json_and_key_check_do_not_consume() -> None:
    async with (
        MockModelServer(["success"], apiKey="secret") as server,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        assert (await client.get("/v1/messages")).status_code == 404
        assert (await client.post("/v2/other", json={})).status_code == 404
        assert (await client.post("/v1/messages", content=b"{bad", headers={"x-api-key": "secret"})).status_code == 400
        assert (await client.post("/v1/messages", json={"model": "m"})).status_code == 401
        ok = await client.post(
            "/chat/completions", json={"model": "m", "dsh_session_log": "x"}, headers={"authorization": "Bearer secret"}
        )
        assert ok.status_code == 200 and ok.text.endswith("data: [DONE]\n\n")
        assert len(server.requests) == 1 and server.requests[0]["body"]["dsh_session_log"] == "x"
        exhausted = await client.post("/v1/messages", json={}, headers={"x-api-key": "secret"})
        assert exhausted.status_code == 500
        assert exhausted.json() == {
            "error": {"message": "mock script exhausted", "type": "mock_error", "code": "MOCK_SCRIPT_EXHAUSTED"}
        }


async def test_repeat_last_and_enqueue() -> None:
    async with (
        MockModelServer(["server_error"], repeat_last=True) as server,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        assert [(await client.post("/v1/messages", json={})).status_code for _ in range(3)] == [500, 500, 500]
        server.enqueue("auth_error")
        assert (await client.post("/v1/messages", json={})).status_code == 401
        assert (await client.post("/v1/messages", json={})).status_code == 401


async def test_a_held_request_takes_its_behaviour_when_released() -> None:
    release = asyncio.Event()

    async def hold(body: dict[str, Any]) -> None:
        if body.get("model") == "late":
            await release.wait()

    async with (
        MockModelServer(["auth_error", "server_error"], hold=hold) as server,
        httpx.AsyncClient(base_url=server.base_url) as late_client,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        late = asyncio.create_task(late_client.post("/v1/messages", json={"model": "late"}))
        assert (await client.post("/v1/messages", json={"model": "early"})).status_code == 401
        assert not late.done()
        release.set()
        assert (await late).status_code == 500
        assert [r["body"]["model"] for r in server.requests] == ["early", "late"]


async def test_choose_picks_each_behaviour_from_the_request_body() -> None:
    picks = {"a": "auth_error", "b": "server_error"}
    async with (
        MockModelServer(["rate_limit"], choose=lambda body: picks[body["model"]]) as server,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        statuses = [(await client.post("/v1/messages", json={"model": m})).status_code for m in "bab"]
        assert statuses == [500, 401, 500]
        assert list(server.queue) == ["rate_limit"]
        with pytest.raises(ValueError, match="unknown mock behaviour"):
            server.choose = lambda body: "no_such_behaviour"
            server._choose({})


async def test_random_is_reproducible_with_a_seed() -> None:
    async def statuses(seed: int) -> list[int]:
        weights = {"server_error": 1.0, "auth_error": 1.0, "rate_limit": 1.0}
        server = MockModelServer(["random"], repeat_last=True, random_state=seed, random_weights=weights)
        async with server, httpx.AsyncClient(base_url=server.base_url) as client:
            return [(await client.post("/v1/messages", json={})).status_code for _ in range(8)]

    first = await statuses(7)
    assert first == await statuses(7)
    assert set(first) <= {500, 401, 429}


def test_unknown_behaviours_and_options_are_rejected() -> None:
    with pytest.raises(ValueError):
        MockModelServer(["nope"])
    with pytest.raises(TypeError):
        MockModelServer([], chunk_size=3)


@pytest.mark.parametrize("dialect", ["messages", "chat"])
async def test_scripted_entries_render_in_both_dialects(dialect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "k")
    entries = [
        {"reasoning": "plan", "text": "answer", "tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]},
        {"throw": {"code": "RATE_LIMIT", "message": "slow", "status": 429}},
        {"error": {"code": "SERVER", "message": "inner"}},
    ]
    async with MockModelServer(entries, chunkSize=3) as server:
        adapter: Any
        if dialect == "messages":
            adapter = DeepSeekAdapter(Config(), base_url=server.base_url)
            options = {"model": "deepseek-v4-flash", "messages": USER}
        else:
            adapter = OpenAICompatAdapter([ProviderConfig(id="c", baseURL=server.base_url)])
            options = {"provider": "c", "model": "m", "messages": USER}
        asm = BlockAssembler()
        for chunk in await collect(adapter.stream(options)):
            asm.add(chunk)
        failures = []
        for _ in range(2):
            try:
                await collect(adapter.stream(options))
            except Exception as exc:
                failures.append((getattr(exc, "code", None), getattr(exc, "status", None), str(exc)))
        await adapter.aclose()
    assert [b["type"] for b in asm.content()] == ["reasoning", "text", "tool-call"]
    assert asm.content()[2]["arguments"] == '{"file_path":"a.txt"}'
    assert asm.finish == {"kind": "tool-calls"}
    assert failures == [("RATE_LIMIT", 429, "slow"), ("SERVER", None, "inner")]


def test_cli_prints_a_ready_line_and_serves() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pydsh.testing.mock_model_server",
            "--port",
            "0",
            "--sequence",
            "success,rate_limit",
            "--retry-after-ms",
            "2500",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["type"] == "ready" and ready["baseUrl"].startswith("http://127.0.0.1:")
        with httpx.Client(base_url=ready["baseUrl"]) as client:
            assert "message_stop" in client.post("/v1/messages", json={"model": "m"}).text
            limited = client.post("/v1/messages", json={})
            assert (limited.status_code, limited.headers["retry-after"]) == (429, "3")
    finally:
        proc.terminate()
        proc.wait(10)


def test_cli_connection_refused_delays_binding() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pydsh.testing.mock_model_server",
            "--sequence",
            "connection_refused,success",
            "--listen-delay-ms",
            "3000",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        with pytest.raises(httpx.ConnectError):
            httpx.post(ready["baseUrl"] + "/v1/messages", json={})
    finally:
        proc.terminate()
        proc.wait(10)
