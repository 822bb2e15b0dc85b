"""pydsh and the reference runtime (DeepSeek Harness 0.2.1rc2) share one ``DSH_HOME``, both ways.

The reference is driven by the published SDK client (its ``sdk`` profile); pydsh runs each of its
profiles in its default configuration: ``sdk`` and ``sdk-minimal`` through the same client, the others
through ``pydsh.open_host``. In one home, every pydsh profile creates a session (a plain prompt and a
tool step: ``read``, or ``bash`` in ``sdk-minimal``, which has no other) that the reference resumes and
continues with the history pydsh wrote and pydsh then continues again, and resumes and continues one
the reference created. (The reference's own ``sdk-minimal`` writes plain logs and refuses a home holding
zstd ones, so it cannot share a home with its own ``sdk`` profile either; it is not one of the two sides.) The home also holds what a
reference user brings: a ``cordis.patch.yml`` switching tools off (both runtimes honour it) and a
``--patch`` with a key neither reads (both start).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepseek_harness
import pytest

import pydsh
from pydsh.session.persistence.recode import main as recode
from tests.logs import PLAIN_LOGS, stored_log, stored_logs
from tests.sdk.conftest import PYDSH, REPO, ThreadedMock
from tests.sdk.reference import REFERENCE, needs_reference

pytestmark = needs_reference

PROFILES = ("sdk", "sdk-minimal", "headless", "acp", "web", "embed")
WIRED = frozenset({"sdk", "sdk-minimal"})
"""pydsh profiles served over the SDK wire, driven through the published client."""
STEPS = {
    "read": {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]},
    "bash": {"tool_calls": [{"name": "bash", "arguments": {"command": "cat a.txt"}}]},
}
OFF = "- {id: tool-todo, disabled: true}\n- {id: tool-web, disabled: true}\n"
"""A reference user's profile patch: no todo_write, no web_fetch."""
PERSONA = [{"id": "system-prompt", "config": {"persona": "a key the reference's own smoke scripts set"}}]


@dataclass
class Home:
    """One home and workspace shared by both runtimes, and the mock model they both call."""

    server: ThreadedMock
    home: Path
    ws: Path
    persona: Path

    def script(self, *behaviours: dict[str, Any]) -> None:
        """Queue the model's next answers."""
        for behaviour in behaviours:
            self.server.loop.call_soon_threadsafe(self.server.server.enqueue, behaviour)

    def client(self, runtime: str, profile: str) -> Any:
        """The published client on ``runtime``'s executable and profile (pydsh imports this checkout)."""
        return deepseek_harness.DeepSeekHarness(
            dsh_bin=PYDSH if runtime == "pydsh" else REFERENCE,
            profile=profile,
            dsh_home=str(self.home),
            cwd=str(self.ws),
            api_key="sk-test",
            base_url=self.server.base_url,
            patches=(str(self.persona),),
            env={"PYTHONPATH": str(REPO)},
        )


@pytest.fixture
def shared(mock: Callable[..., ThreadedMock], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (home / "profiles" / "sdk").mkdir(parents=True)
    (home / "profiles" / "sdk" / "cordis.patch.yml").write_text(OFF)
    persona = tmp_path / "persona.json"
    persona.write_text(json.dumps(PERSONA))
    server = mock([], repeat_last=True)
    monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    return Home(server, home, ws, persona)


def run(shared: Home, runtime: str, profile: str, session_id: str, prompts: list[str], *, create: bool) -> list[str]:
    """Run ``prompts`` in ``session_id`` (created or resumed) in ``runtime``; their final answers."""
    if runtime == "reference" or profile in WIRED:
        client = shared.client(runtime, profile)
        try:
            session = client.start_session(session_id) if create else client.resume_session(session_id)
            results = [session.run(prompt) for prompt in prompts]
        finally:
            client.close()
        assert all(r.finish_reason == "completed" for r in results), (runtime, profile, session_id)
        return [r.final_response for r in results]
    return asyncio.run(in_process(shared, profile, session_id, prompts, create=create))


async def in_process(shared: Home, profile: str, session_id: str, prompts: list[str], *, create: bool) -> list[str]:
    """:func:`run` for a pydsh profile without a wire: ``pydsh.open_host`` in its default configuration."""
    async with pydsh.open_host(profile, cwd=shared.ws, dsh_home=shared.home) as host:
        agent = await (host.create_agent(session_id=session_id) if create else host.resume_agent(session_id))
        results = [await agent.run(prompt) for prompt in prompts]
        await agent.close()
    assert all(r.finish_reason == "completed" for r in results), (profile, session_id)
    return [r.final_response for r in results]


def said(body: dict[str, Any]) -> list[str]:
    """Text and tool blocks of a model request, in order: ``user:hi``, ``tool_use:read``, …"""
    out = []
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if block["type"] == "text":
                out.append(f"{message['role']}:{block['text']}")
            elif block["type"] in ("tool_use", "tool_result"):
                out.append(f"{block['type']}:{block.get('name', '')}")
    return out


def tool_of(profile: str) -> str:
    """The tool of the step a session created in ``profile`` takes."""
    return "bash" if profile == "sdk-minimal" else "read"


def created(shared: Home, runtime: str, profile: str, session_id: str) -> None:
    """Create ``session_id``: a plain prompt, then a prompt with one tool step."""
    shared.script({"text": "hello"}, STEPS[tool_of(profile)], {"text": "read it"})
    seen = len(shared.server.requests)
    assert run(shared, runtime, profile, session_id, ["hi", "read a.txt"], create=True) == ["hello", "read it"]
    if profile == "sdk":
        tools = {tool["name"] for tool in shared.server.requests[seen]["body"]["tools"]}
        assert "read" in tools and not tools & {"todo_write", "web_fetch"}, (runtime, sorted(tools))


def continued(shared: Home, runtime: str, profile: str, session_id: str, prompt: str, tool: str = "read") -> None:
    """Resume ``session_id`` and run ``prompt``; its model request carries the history the other runtime wrote
    (with its ``tool`` step), and what was stored before stays byte for byte at the start of the log."""
    log = stored_log(shared.home / "sessions", session_id)
    assert log.name == "session.v4.jsonl.zstd", (runtime, profile, log)
    written = log.read_bytes()
    shared.script({"text": "continued"})
    seen = len(shared.server.requests)
    assert run(shared, runtime, profile, session_id, [prompt], create=False) == ["continued"]
    history = said(shared.server.requests[seen]["body"])
    for earlier in ("user:hi", "assistant:hello", "user:read a.txt", f"tool_use:{tool}", "tool_result:"):
        assert earlier in history, (runtime, profile, earlier, history)
    assert history.index("user:hi") < history.index(f"tool_use:{tool}") < history.index(f"user:{prompt}")
    assert stored_log(shared.home / "sessions", session_id).read_bytes().startswith(written)


def test_every_pydsh_profile_and_the_reference_share_one_home_both_ways(shared: Home) -> None:
    for profile in PROFILES:
        ours, theirs = f"pydsh-{profile}", f"reference-for-{profile}"
        created(shared, "pydsh", profile, ours)
        continued(shared, "reference", "sdk", ours, "continue here", tool_of(profile))
        continued(shared, "pydsh", profile, ours, "and back", tool_of(profile))
        created(shared, "reference", "sdk", theirs)
        continued(shared, "pydsh", profile, theirs, "continue here")
        continued(shared, "reference", "sdk", theirs, "and back")
    logs = stored_logs(shared.home / "sessions")
    assert len(logs) == 2 * len(PROFILES)
    assert {log.name for log in logs} == {"session.v4.jsonl.zstd"}


def reference_headless(home: Path, ws: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    """One ``dsh headless`` task in ``home``."""
    env = {**os.environ, "DSH_HOME": str(home), "DEEPSEEK_BASE_URL": base_url, "DEEPSEEK_API_KEY": "sk-test"}
    return subprocess.run(
        [REFERENCE, "headless", "say hi"], cwd=ws, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_plain_logs_written_before_lock_the_reference_out_until_recoded(shared: Home) -> None:
    async def plain_session() -> None:
        async with pydsh.open_host("embed", cwd=shared.ws, dsh_home=shared.home, patches=[PLAIN_LOGS]) as host:
            agent = await host.create_agent(session_id="old")
            await agent.run("hi")
            await agent.run("read a.txt")

    shared.script({"text": "hello"}, STEPS["read"], {"text": "read it"})
    asyncio.run(plain_session())
    plain = stored_log(shared.home / "sessions", "old")
    assert plain.name == "session.v4.jsonl"
    shared.script({"text": "refused"})
    refused = reference_headless(shared.home, shared.ws, shared.server.base_url)
    assert refused.returncode == 1
    assert (
        f'dsh: session artifact "{plain}" uses .jsonl, but this backend is configured for compression "zstd"'
        in refused.stderr
    )
    assert recode([str(shared.home / "sessions")]) == 0
    shared.script({"text": "fine"})
    started = reference_headless(shared.home, shared.ws, shared.server.base_url)
    assert started.returncode == 0, started.stderr
    continued(shared, "reference", "sdk", "old", "continue here")
