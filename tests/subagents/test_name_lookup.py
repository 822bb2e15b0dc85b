"""Name lookup against stored logs: only a missing session reads as absent (spec 07 §7.5, §6.3)."""

from __future__ import annotations

import errno
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.loop import LoopAgent
from pydsh.session.keys import SESSION_PERSISTENCE, SESSION_QUERY, SESSIONS
from pydsh.subagents.keys import SUBAGENTS
from pydsh.subagents.service import SubagentService
from tests.agent.harness import Host, start_host
from tests.subagents.helpers import calls, deleg, quiesce, result_texts, results, tool


@pytest.fixture
async def tree(tmp_path: Path) -> AsyncIterator[tuple[Host, LoopAgent, str]]:
    """A root whose settled child ``agent-1`` has left memory; the root then calls ``list_agents``."""
    root_script = [calls(deleg("a")), {"text": "ok"}, {"text": "noted"}, calls(tool("list_agents")), {"text": "seen"}]
    host = await start_host([root_script, [{"text": "done"}]])
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        await quiesce(host)
        child_id = results(root.session)[0]["meta"]["subagentId"]
        assert host.kernel.ctx.require(SESSIONS).get(child_id) is None
        yield host, root, child_id
    finally:
        await host.close()


def failing_once(monkeypatch: pytest.MonkeyPatch, target: Any, method: str, error: Exception) -> None:
    real = getattr(target, method)
    errors = [error]

    async def flaky(session_id: str) -> Any:
        if errors:
            raise errors.pop()
        return await real(session_id)

    monkeypatch.setattr(target, method, flaky)


async def test_a_failed_catalog_read_raises_and_caches_no_name(
    tree: tuple[Host, LoopAgent, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, root, child_id = tree
    ctx = host.kernel.ctx
    service: SubagentService = ctx.require(SUBAGENTS)
    sessions = ctx.require(SESSIONS)
    await sessions.flush(root.session)
    monkeypatch.setattr(sessions, "get", lambda session_id: None)
    service.full_names.clear()
    failing_once(monkeypatch, ctx.require(SESSION_QUERY), "read_session", OSError(errno.EIO, "Input/output error"))
    with pytest.raises(OSError, match="Input/output error"):
        await service.full_name(child_id)
    assert child_id not in service.full_names
    assert await service.full_name(child_id) == "agent-1"


async def test_an_unexpected_error_is_not_listed_as_unavailable(
    tree: tuple[Host, LoopAgent, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, root, _child_id = tree
    host.kernel.ctx.require(SUBAGENTS).full_names.clear()
    failing_once(monkeypatch, host.kernel.ctx.require(SESSION_PERSISTENCE), "stat", RuntimeError("stat broke"))
    await host.run(root, "list")
    assert result_texts(root.session)[-1] == "Error: stat broke"


async def test_an_unreadable_child_log_is_listed_as_unavailable(
    tree: tuple[Host, LoopAgent, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, root, child_id = tree
    service: SubagentService = host.kernel.ctx.require(SUBAGENTS)
    service.full_names.clear()
    failing_once(
        monkeypatch, host.kernel.ctx.require(SESSION_PERSISTENCE), "stat", PermissionError(errno.EACCES, "denied")
    )
    await host.run(root, "list")
    assert result_texts(root.session)[-1] == f"{child_id} [diagnostic: unavailable]"
    assert child_id not in service.full_names
    assert await service.full_name(child_id) == "agent-1"


async def test_a_cold_resume_that_cannot_read_the_child_names_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    send = calls(tool("send_message", agent="agent-1", message="more"))
    host = await start_host(
        [[calls(deleg("a")), {"text": "ok"}, {"text": "noted"}, send, {"text": "x"}], [{"text": "done"}]]
    )
    root = (await host.create(tmp_path)).agent
    try:
        await host.run(root, "go")
        await quiesce(host)
        failing_once(monkeypatch, host.kernel.ctx.require(SESSION_QUERY), "read_session", PermissionError(13, "denied"))
        await host.run(root, "send")
        assert result_texts(root.session)[-1] == 'Error: subagent "agent-1" is unavailable: [Errno 13] denied'
        assert results(root.session)[-1]["error"]["code"] == "NOT_RESUMABLE"
    finally:
        await host.close()
