"""Reminders end to end: the tools' results and log records, delivery into the session, resume, ``/schedule``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydsh.agent.loop import LoopAgent
from pydsh.agent.presets import preset_setup
from pydsh.contract.agent import AgentOptions
from pydsh.schedules.command import run_command
from pydsh.schedules.keys import SCHEDULES
from pydsh.schedules.records import compact
from pydsh.schedules.service import Schedules, refusal
from pydsh.schedules.timing import parse_iso
from pydsh.schedules.tools import definitions
from tests.agent.harness import Host, compose, start_host
from tests.subagents.helpers import calls, tool

SERVICE_ROWS = [{"insert": [{"id": "schedule", "name": "pydsh.schedules.service"}]}]
COMMAND_ROWS = [{"insert": [{"id": "command-schedule", "name": "pydsh.schedules.command"}]}]
NOW = parse_iso("2030-05-06T07:08:09.000Z")
TOOLS = ["schedule_create", "schedule_list", "schedule_delete", "schedule_update"]


async def web_like_host(script: list[Any]) -> Host:
    """The web profile's planes (base, presets and the reminder rows of web-app) with a scripted model."""
    host = await start_host(script, bundles=("base", "presets"), patches=(SERVICE_ROWS, COMMAND_ROWS))
    service(host).clock = lambda: NOW
    return host


def service(host: Host) -> Schedules:
    return host.kernel.ctx.require(SCHEDULES)


async def standard(host: Host, cwd: Path) -> LoopAgent:
    handle = await host.create(cwd, agent_preset="standard", setup=preset_setup(host.kernel.ctx))
    return handle.agent


def results(agent: LoopAgent) -> list[Any]:
    """Each tool result's parsed JSON text, in order."""
    found = [e["data"]["message"]["content"][0]["text"] for e in agent.session.events if e["type"] == "tool/result"]
    return [json.loads(text) for text in found]


def changes(agent: LoopAgent) -> list[dict[str, Any]]:
    return [e["data"] for e in agent.session.events if e["type"] == "schedule/change"]


def reminders(agent: LoopAgent) -> list[dict[str, Any]]:
    """The user messages the reminders delivered."""
    events = agent.session.events
    spliced = [m for e in events if e["type"] == "agent/inbox/spliced" for m in e["data"]["inserted"]]
    return [m for m in spliced if m["source"]["kind"] == "schedule"]


async def until(predicate: Any) -> None:
    """Let the loop run until ``predicate()`` holds (a bounded wait: the assertion is on the state, not time)."""
    for _ in range(3000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def create(**args: Any) -> dict[str, Any]:
    return tool("schedule_create", title="Check CI", prompt="look at the CI run", **args)


def test_the_web_profile_mounts_the_service_and_the_standard_preset_the_tools() -> None:
    web = {row.id: row for row in compose(["base", "presets", "web-app"], []).rows}
    assert web["schedule"].name == "schedule"
    assert web["command-schedule"].name == "command-schedule"
    sdk = compose(["base", "agent-tools", "sdk-app"], []).rows
    assert not any(row.id in ("schedule", "tool-schedule") for row in sdk)


async def test_only_a_host_with_the_service_offers_the_tools(tmp_path: Path) -> None:
    without = await start_host([{"text": "hi"}], bundles=("base", "presets"))
    try:
        agent = await standard(without, tmp_path)
        await without.run(agent, "hi")
        assert not set(TOOLS) & set(agent.session.tool_history())
    finally:
        await without.close()
    host = await web_like_host([{"text": "hi"}])
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "hi")
        offered = agent.session.tool_history()
        assert [name for name in offered if name.startswith("schedule_")] == sorted(TOOLS)
    finally:
        await host.close()


async def test_create_list_update_delete_results_and_log_records(tmp_path: Path) -> None:
    script = [
        calls(create(after_seconds=90)),
        calls(tool("schedule_list")),
        calls(tool("schedule_update", id="schedule-1", title="Check the CI")),
        calls(tool("schedule_update", id="schedule-1", every_seconds=600)),
        calls(tool("schedule_delete", id="schedule-1")),
        calls(tool("schedule_delete", id="schedule-1")),
        {"text": "done"},
    ]
    host = await web_like_host(script)
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        created, listed, renamed, every, deleted, missing = results(agent)
        assert created == {
            "id": "schedule-1",
            "kind": "after",
            "title": "Check CI",
            "prompt": "look at the CI run",
            "afterSeconds": 90,
            "scheduledAt": "2030-05-06T07:09:39.000Z",
            "state": "scheduled",
            "deliveryMode": "host",
        }
        assert listed == [created]
        assert renamed == {**created, "title": "Check the CI"}
        assert every == {
            "id": "schedule-1",
            "kind": "every",
            "title": "Check the CI",
            "prompt": "look at the CI run",
            "everySeconds": 600,
            "scheduledAt": "2030-05-06T07:18:09.000Z",
            "state": "scheduled",
            "deliveryMode": "host",
        }
        assert deleted == {"id": "schedule-1", "deleted": True}
        assert missing == {"id": "schedule-1", "deleted": False, "code": "schedule_not_found"}
        stored = [{k: v for k, v in r.items() if k not in ("state", "deliveryMode")} for r in (created, renamed, every)]
        assert changes(agent) == [
            {"version": 1, "operation": "create", "schedule": stored[0]},
            {"version": 1, "operation": "update", "schedule": stored[1]},
            {"version": 1, "operation": "update", "schedule": stored[2]},
            {"version": 1, "operation": "delete", "id": "schedule-1"},
        ]
        first = next(e for e in agent.session.events if e["type"] == "tool/result")
        assert first["data"]["message"]["content"][0]["text"].startswith('{"id":"schedule-1","kind":"after",')
    finally:
        await host.close()


async def test_refusals_are_results_with_the_reference_texts(tmp_path: Path) -> None:
    script = [
        calls(
            tool("schedule_create", title="t", prompt="p"),
            tool("schedule_create", title=" ", prompt="p", after_seconds=5),
            create(every_seconds=30),
            create(at="2030-05-06T07:00:00Z"),
            create(daily={"time": "9:00", "time_zone": "UTC"}),
            create(cron={"expression": "61 * * * *", "time_zone": "Mars/Olympus"}),
            tool("schedule_update", id="schedule-x", prompt="again"),
        ),
        {"text": "ok"},
    ]
    host = await web_like_host(script)
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "try")
        assert results(agent) == [
            {
                "code": "invalid_selector",
                "message": "schedule_create accepts exactly one of after_seconds, at, every_seconds, daily, weekly, "
                "or cron.",
            },
            {"code": "invalid_prompt", "message": "title is required and must be non-empty after trimming."},
            {"code": "frequency_too_high", "message": "every_seconds must be at least 60."},
            {"code": "not_future", "message": "The scheduled time must be strictly in the future."},
            {
                "code": "invalid_rule",
                "message": "daily.time must use HH:mm:ss with optional 1-3 fractional digits, without leap seconds or "
                "24:00.",
            },
            {"code": "invalid_time_zone", "message": "time_zone must be UTC or a valid IANA Area/Location name."},
            {"id": "schedule-x", "updated": False, "code": "schedule_not_found"},
        ]
        assert changes(agent) == []
    finally:
        await host.close()


async def test_a_due_one_shot_is_delivered_as_a_prompt_and_logged_as_dispatched(tmp_path: Path) -> None:
    host = await web_like_host([calls(create(after_seconds=60)), {"text": "set"}, {"text": "checked"}])
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        record_id = "schedule-1"
        service(host).clock = lambda: NOW + 61_000
        assert service(host).deliver_due(agent) == 1
        await until(lambda: len(reminders(agent)) == 1)
        await agent.when_idle()
        (message,) = reminders(agent)
        assert message["content"] == [
            {
                "type": "text",
                "text": "[SCHEDULE REMINDER]\nThis is a scheduled message from the user\n"
                f'schedule_id_json: "{record_id}"\noccurrence_at: 2030-05-06T07:09:09.000Z\n'
                'reminder_prompt_json: "look at the CI run"',
            }
        ]
        assert changes(agent)[-1] == {"version": 1, "operation": "dispatch", "id": record_id}
        assert service(host).listed(agent) == []
        answers = [e["data"]["message"]["content"] for e in agent.session.events if e["type"] == "assistant/message"]
        assert answers[-1] == [{"type": "text", "text": "checked"}]
        assert "[SCHEDULE REMINDER]" in json.dumps(agent.session.derive_messages()[-2])
    finally:
        await host.close()


async def test_recurring_reminders_due_together_arrive_as_one_batch(tmp_path: Path) -> None:
    script = [
        calls(create(every_seconds=60), tool("schedule_create", title="Tea", prompt="make tea", every_seconds=120)),
        {"text": "set"},
        {"text": "on it"},
    ]
    host = await web_like_host(script)
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        first, second = "schedule-1", "schedule-2"
        service(host).clock = lambda: NOW + 250_000
        assert service(host).deliver_due(agent) == 1
        await until(lambda: len(reminders(agent)) == 1)
        await agent.when_idle()
        text = reminders(agent)[0]["content"][0]["text"]
        head, payload = text.split("\nreminders_json: ")
        assert head == "[SCHEDULE REMINDER BATCH]\nThis is a scheduled message from the user"
        assert json.loads(payload) == [
            {
                "schedule_id": first,
                "occurrence_at": "2030-05-06T07:12:09.000Z",
                "reminder_prompt": "look at the CI run",
            },
            {"schedule_id": second, "occurrence_at": "2030-05-06T07:12:09.000Z", "reminder_prompt": "make tea"},
        ]
        accepted = "2030-05-06T07:12:19.000Z"
        assert changes(agent)[-2:] == [
            {"version": 1, "operation": "dispatch", "id": first, "acceptedAt": accepted},
            {"version": 1, "operation": "dispatch", "id": second, "acceptedAt": accepted},
        ]
        targets = {r["id"]: r["scheduledAt"] for r in service(host).listed(agent)}
        assert targets == {first: "2030-05-06T07:13:09.000Z", second: "2030-05-06T07:14:09.000Z"}
    finally:
        await host.close()


async def test_a_resumed_session_delivers_what_came_due_while_it_was_closed(tmp_path: Path) -> None:
    host = await web_like_host([calls(create(after_seconds=60)), {"text": "set"}])
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        session_id = agent.session.id
        handle = host.agents.handle(session_id)
        assert handle is not None
        await handle.dispose()
    finally:
        await host.close()
    again = await web_like_host([{"text": "reminded"}])
    service(again).clock = lambda: NOW + 3_600_000
    try:
        handle = await again.agents.resume(session_id, setup=preset_setup(again.kernel.ctx))
        resumed: LoopAgent = handle.agent  # type: ignore[assignment]
        await until(lambda: len(reminders(resumed)) == 1 and resumed.status == "idle")
        assert service(again).listed(resumed) == []
        assert changes(resumed)[-1]["operation"] == "dispatch"
    finally:
        await again.close()


async def test_a_resumed_session_rearms_a_reminder_not_yet_due(tmp_path: Path) -> None:
    host = await web_like_host([calls(create(daily={"time": "09:30:00", "time_zone": "Europe/Berlin"})), {"text": "x"}])
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        session_id = agent.session.id
        handle = host.agents.handle(session_id)
        assert handle is not None
        await handle.dispose()
    finally:
        await host.close()
    again = await web_like_host([])
    try:
        handle = await again.agents.resume(session_id, setup=preset_setup(again.kernel.ctx))
        await until(lambda: session_id in service(again).timers)
        (record,) = service(again).listed(handle.agent)
        assert (record["kind"], record["scheduledAt"]) == ("daily", "2030-05-06T07:30:00.000Z")
        assert again.agents.kept(handle.agent), "a frontend could let go of an agent with an armed reminder"
        service(again).delete(handle.agent, record["id"])
        assert not again.agents.kept(handle.agent)
        await handle.dispose()
        assert session_id not in service(again).timers
    finally:
        await again.close()


async def test_the_schedule_command_lists_and_deletes_without_calling_the_model(tmp_path: Path) -> None:
    host = await web_like_host([calls(create(every_seconds=3600)), {"text": "set"}])
    try:
        agent = await standard(host, tmp_path)
        await host.run(agent, "remind me")
        record_id = "schedule-1"
        answers = len([e for e in agent.session.events if e["type"] == "assistant/message"])
        listed = await host.run(agent, "/schedule")
        deleted = await host.run(agent, f"/schedule delete {record_id}")
        empty = await host.run(agent, "/schedule")
        wrong = await host.run(agent, "/schedule frobnicate")
        assert len([e for e in agent.session.events if e["type"] == "assistant/message"]) == answers
        done = [e["data"] for run in (listed, deleted, empty, wrong) for e in run if e["type"] == "command/done"]
        assert done[0]["text"] == f"{record_id}  Check CI  (every 3600s; next 2030-05-06T08:08:09.000Z)"
        assert (done[1]["kind"], done[1]["text"]) == ("success", f"deleted {record_id}")
        assert (done[2]["kind"], done[2]["text"]) == ("success", "no reminders")
        assert (done[3]["kind"], done[3]["text"]) == ("error", "usage: /schedule, or /schedule delete ID")
        runs = [e["data"] for e in deleted if e["type"] == "command/run"]
        assert runs == [
            {
                "commandId": runs[0]["commandId"],
                "name": "schedule",
                "source": {"kind": "user"},
                "args": f"delete {record_id}",
            }
        ]
        assert changes(agent)[-1] == {"version": 1, "operation": "delete", "id": record_id}
    finally:
        await host.close()


def test_a_delegated_subagent_is_refused_by_every_tool_and_the_command() -> None:
    child = SimpleNamespace(session=SimpleNamespace(header={"delegationDepth": 1}), options=AgentOptions())
    refused = {"code": "subagent_session", "message": "A delegated subagent cannot use reminders."}
    assert refusal(child) == refused
    execute = definitions(Schedules(None))[0].execute  # type: ignore[arg-type]
    outcome = execute({"title": "t", "prompt": "p", "after_seconds": 5}, SimpleNamespace(agent=child))
    assert (outcome.content, outcome.is_error) == ([{"type": "text", "text": compact(refused)}], False)
    assert run_command(Schedules(None), child, []) == {"kind": "error", "text": refused["message"]}  # type: ignore[arg-type]
