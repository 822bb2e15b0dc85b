"""The bytes a model receives: every request body of a scripted multi-turn session, compared with a golden.

The session reads a file step after step while its instruction file and skills change between steps,
compacts, answers, and is resumed in a fresh host after another edit; both HTTP adapters serialise it.
The harness caches work per step (token prices, converted history, file checks), and none of that may
change a single byte the model sees. Regenerate the golden after an intended change of what the model
sees with ``python -m tests.agent.test_request_bytes``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import AGENTS
from pydsh.agent.registry import CreateAgentOptions
from pydsh.contract.agent import AgentOptions, user_message
from pydsh.kernel import Kernel
from pydsh.kernel.compose import resolve_rows
from pydsh.testing.mock_model_server import MockModelServer
from tests.agent.harness import compose
from tests.conftest import FIXTURES

GOLDEN = FIXTURES / "request-bodies.json"
ADAPTERS = ("deepseek", "openai")
SKILL = "---\nname: greet\ndescription: Greets the user by name.\n---\nSay hello.\n"
WAVE = "---\nname: wave\ndescription: Waves at the user.\n---\nWave.\n"


def read(limit: int) -> dict[str, Any]:
    """A distinct read per step (identical calls would earn repeat-call reminders)."""
    return {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt", "offset": 1, "limit": limit}}]}


SCRIPT = [read(1), read(2), read(3), {"text": "done"}, {"text": "summary"}, read(4), {"text": "again"}]
RESUMED = [read(5), {"text": "resumed"}]


def patches(base_url: str) -> list[list[dict[str, Any]]]:
    provider = {"id": "local", "baseURL": base_url + "/v1", "models": [{"id": "mock-model", "contextWindow": 200000}]}
    return [
        [{"id": "llm-deepseek", "config": {"baseURL": base_url}}],
        [{"id": "llm-openai-compat", "config": {"providers": [provider]}}],
    ]


def options(adapter: str) -> AgentOptions:
    return AgentOptions(provider="local", model="mock-model") if adapter == "openai" else AgentOptions()


async def host(base_url: str) -> Kernel:
    kernel = Kernel()
    await kernel.load(resolve_rows(compose(["base", "agent-tools"], patches(base_url)).rows))
    return kernel


async def prompt(agent: Any, text: str) -> None:
    agent.followup(user_message(text))
    await agent.when_idle()
    assert agent.session.events[-1]["data"]["reason"] == {"kind": "completed"}


def workspace(root: Path) -> Path:
    cwd = root / "ws"
    (cwd / ".dsh" / "skills" / "greet").mkdir(parents=True)
    (cwd / ".dsh" / "skills" / "greet" / "SKILL.md").write_text(SKILL)
    (cwd / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (cwd / "AGENTS.md").write_text("Be brief.\n")
    return cwd


async def session_bodies(adapter: str, root: Path) -> list[bytes]:
    """The raw request bodies of the scripted session, in order (files change as the requests arrive)."""
    cwd = workspace(root)
    edits = {
        2: lambda: (cwd / "AGENTS.md").write_text("Be very brief.\n"),
        3: lambda: (cwd / ".dsh" / "skills" / "wave.md").write_text(WAVE),
    }

    async def hold(body: dict[str, Any]) -> None:
        edits.get(len(server.requests), lambda: None)()

    async with MockModelServer(sequence=SCRIPT, hold=hold) as server:
        kernel = await host(server.base_url)
        try:
            create = CreateAgentOptions(cwd=str(cwd), agent_options=options(adapter))
            handle = await kernel.ctx.require(AGENTS).create(create)
            for text in ("read a.txt", "/compact", "read it once more"):
                await prompt(handle.agent, text)
            session_id = handle.agent.session.id
        finally:
            await kernel.dispose()
        (cwd / "AGENTS.md").write_text("Be brief again.\n")
        for behaviour in RESUMED:
            server.enqueue(behaviour)
        kernel = await host(server.base_url)
        try:
            handle = await kernel.ctx.require(AGENTS).resume(session_id, agent_options=options(adapter))
            await prompt(handle.agent, "after the edit")
        finally:
            await kernel.dispose()
    return [r["raw"] for r in server.requests]


def normalised(raw: bytes, root: Path, home: Path) -> dict[str, Any]:
    """A body with this run's directories replaced, its tools by their digest, and the digest of its bytes."""
    text = raw.decode().replace(str(root), "<root>").replace(str(home), "<home>")
    body = json.loads(text)
    if "tools" in body:
        body["tools"] = hashlib.sha256(json.dumps(body["tools"]).encode()).hexdigest()
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "body": body}


async def record(adapter: str, root: Path, home: Path) -> list[dict[str, Any]]:
    return [normalised(raw, root, home) for raw in await session_bodies(adapter, root)]


@pytest.mark.parametrize("adapter", ADAPTERS)
async def test_request_bodies_match_the_golden(
    adapter: str, tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    monkeypatch.setenv("AGENTS_HOME", str(tmp_path / "agents-home"))
    expected = json.loads(GOLDEN.read_text())[adapter]
    bodies = await record(adapter, tmp_path, isolated_home)
    assert [b["body"] for b in bodies] == [e["body"] for e in expected]
    assert [b["sha256"] for b in bodies] == [e["sha256"] for e in expected]


async def regenerate() -> None:
    """Write the golden from this checkout (run it only after an intended change of the model's view)."""
    golden = {}
    for adapter in ADAPTERS:
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as home:
            os.environ |= {
                "DSH_HOME": home,
                "DEEPSEEK_API_KEY": "sk-test",
                "AGENTS_HOME": str(Path(tmp) / "agents-home"),
            }
            golden[adapter] = await record(adapter, Path(tmp), Path(home))
    GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(regenerate())
