"""A session holding pydsh's reminder records resumes and continues in the reference runtime."""

from __future__ import annotations

from pathlib import Path

from pydsh.schedules.keys import SCHEDULES
from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer
from tests.schedules.test_schedules import create, standard, web_like_host
from tests.sdk.reference import REFERENCE, needs_reference
from tests.subagents.helpers import calls

pytestmark = needs_reference


async def test_the_reference_continues_a_session_with_every_kind_of_reminder_record(
    tmp_path: Path, isolated_home: Path
) -> None:
    script = [
        calls(
            create(after_seconds=60),
            create(every_seconds=60),
            create(daily={"time": "09:00:00", "time_zone": "UTC"}),
            create(weekly={"time": "09:00:00", "time_zone": "UTC", "weekdays": [1]}),
            create(cron={"expression": "0 9 * * 1-5", "time_zone": "UTC"}),
            create(at="2031-01-01T00:00:00Z"),
        ),
        calls(create(after_seconds=120)),
        {"text": "set"},
        {"text": "reminded"},
    ]
    host = await web_like_host(script)
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        schedules = host.kernel.ctx.require(SCHEDULES)
        schedules.delete(agent, "schedule-7")
        schedules.update(agent, "schedule-6", {"title": "Renamed"})
        schedules.clock = lambda: 2_000_000_000_000
        assert schedules.deliver_due(agent) == 3
        await agent.when_idle()
        kinds = [e["data"]["operation"] for e in agent.session.events if e["type"] == "schedule/change"]
        assert kinds == ["create"] * 7 + ["delete", "update"] + ["dispatch"] * 6
        session_id = agent.session.id
        handle = host.agents.handle(session_id)
        assert handle is not None
        await handle.dispose()
    finally:
        await host.close()
    settings = {"dsh_bin": REFERENCE, "dsh_home": str(isolated_home), "cwd": str(tmp_path), "api_key": "sk-test"}
    server = MockModelServer(sequence=[{"text": "continued"}], repeat_last=True)
    async with server, AsyncHarness(base_url=server.base_url, **settings) as harness:
        resumed = await harness.resume_session(session_id)
        result = await resumed.run("again")
    assert (result.final_response, result.finish_reason) == ("continued", "completed")
