"""A plugin added to a running profile (``pydsh plugin add``) loads without a restart when it allows it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

import pydsh.testing
from pydsh.apps.plugins import _record, profile_lock, raw_profile, write_profile
from pydsh.contract.tools import TOOLS
from pydsh.kernel.profiles import profile_dir

FAST = [{"id": "profile-watch", "config": {"intervalMs": 20}}]
LIST_PEERS = {"tool_calls": [{"name": "list_peer_agents", "arguments": {}}]}


def added(profile: str, distribution: str, bundle: str) -> None:
    """What ``pydsh plugin add`` does to ``profile.yml`` once pip has installed ``distribution``."""
    directory = profile_dir(profile)
    with profile_lock(directory):
        data = raw_profile(directory)
        _record(data, {distribution: [bundle]})
        write_profile(directory, data)


async def until(check: Any, seconds: float = 10) -> None:
    """Wait until ``check()`` is true."""
    for _ in range(int(seconds / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def test_agent_message_added_to_a_running_web_profile_serves_its_next_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = [{"text": "before"}, LIST_PEERS, {"text": "after"}]
    home = tmp_path / "home"
    async with pydsh.testing.scripted_host(script, profile="web", patches=[FAST], cwd=tmp_path, dsh_home=home) as host:
        tools = host.ctx.require(TOOLS)
        agent = await host.create_agent()
        assert (await agent.run("hi")).final_response == "before"
        assert tools.lookup(None, "send_agent_message") is None
        with caplog.at_level(logging.WARNING, logger="pydsh.kernel.profile_watch"):
            added("web", "pydsh-agent-message", "agent-message")
            await until(lambda: bool(caplog.records))
        assert [r.getMessage() for r in caplog.records] == [
            'bundle "agent-message" was added to profile "web": loaded without a restart'
        ]
        assert tools.lookup(None, "send_agent_message") is not None
        result = await agent.run("who is there?")
        assert result.final_response == "after"
        [peers] = [e["data"] for e in agent.events if e["type"] == "tool/result"]
        assert agent.session_id in str(peers) and not peers.get("isError")


async def test_a_plugin_that_does_not_allow_it_waits_for_the_next_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    async with pydsh.testing.scripted_host([], profile="web", patches=[FAST], cwd=tmp_path, dsh_home=home) as host:
        with caplog.at_level(logging.WARNING, logger="pydsh.kernel.profile_watch"):
            added("web", "pydsh-team-models", "team-models")
            await until(lambda: bool(caplog.records))
        assert [r.getMessage() for r in caplog.records] == [
            'bundle "team-models" was added to profile "web"; it takes effect at the next start: plugin team-models '
            "does not declare that it can load into a running process"
        ]
        assert "team-models" not in [fiber.row_id for fiber in host.ctx.fiber.children]


async def test_an_added_bundle_whose_rows_cannot_resolve_is_named_and_the_watch_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    async with pydsh.testing.scripted_host([], profile="web", patches=[FAST], cwd=tmp_path, dsh_home=home) as host:
        (profile_dir("web") / "patch.yml").write_text(
            "- {id: agent-message, config: {rateLimit: '${env:PYDSH_NO_SUCH_VAR}'}}\n"
        )
        with caplog.at_level(logging.WARNING, logger="pydsh.kernel.profile_watch"):
            added("web", "pydsh-agent-message", "agent-message")
            await until(lambda: bool(caplog.records))
            added("web", "pydsh-team-models", "team-models")
            await until(lambda: len(caplog.records) > 1)
        assert caplog.records[0].getMessage() == (
            'bundle "agent-message" was added to profile "web" but cannot load: row "agent-message": environment '
            "variable PYDSH_NO_SUCH_VAR is not set (used as ${env:PYDSH_NO_SUCH_VAR})"
        )
        assert 'bundle "team-models" was added' in caplog.records[1].getMessage()
        assert host.ctx.require(TOOLS).lookup(None, "send_agent_message") is None
