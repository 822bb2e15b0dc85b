"""``time-context``: the exact reading, its zone and elapsed rules, refresh interval and where it is mounted
(spec 03 §10.4)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.presets import preset_setup
from pydsh.agent.time_context import (
    Config,
    browser_line,
    format_duration,
    format_timestamp,
    load_zone,
    reading_text,
)
from tests.agent.harness import Host, compose, start_host

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
UNAVAILABLE = (
    "Browser time zone for this request: unavailable. Ask the user to clarify otherwise-unqualified dates and times."
)


def readings(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "time-context"]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["source"]["kind"] for e in events if e["type"] == "user/message"]


async def standard_agent(host: Host, cwd: Path) -> Any:
    return (await host.create(cwd, agent_preset="standard", setup=preset_setup(host.kernel.ctx))).agent


def test_durations_timestamps_and_zone_lines_are_exact() -> None:
    assert [format_duration(ms) for ms in (0, 999, 65_000, 3_723_000, 90_061_000, -5)] == [
        "0s",
        "0s",
        "1m 5s",
        "1h 2m 3s",
        "1d 1h 1m 1s",
        "0s",
    ]
    moment = 1_792_476_185_000  # 2026-10-20T06:03:05Z
    assert format_timestamp(moment, "Asia/Shanghai") == "2026-10-20T14:03:05+08:00[Asia/Shanghai]"
    assert format_timestamp(moment, "UTC") == "2026-10-20T06:03:05+00:00[UTC]"
    assert format_timestamp(moment, "America/New_York") == "2026-10-20T02:03:05-04:00[America/New_York]"
    assert browser_line(["Europe/Paris"]) == (
        "Browser time zone for this request: Europe/Paris. Interpret otherwise-unqualified dates and times in this zone."
    )
    assert browser_line(["Asia/Tokyo", "Europe/Paris"]) == (
        'Browser time zone for this request: mixed ["Asia/Tokyo","Europe/Paris"]. '
        "Ask the user to clarify otherwise-unqualified dates and times."
    )
    assert browser_line([]) == UNAVAILABLE
    assert reading_text(moment, 2, 3, moment - 4_000, zone="UTC", zones=[]) == (
        "Time sampled while preparing turn 2, step 3: 2026-10-20T06:03:05+00:00[UTC]\n"
        f"{UNAVAILABLE}\nElapsed since the preceding step context: 4s."
    )
    assert reading_text(moment, 1, 1, None, zone="UTC", zones=[]).endswith(
        "Elapsed since the preceding model-visible message: unavailable."
    )


def test_bad_zones_are_refused_with_the_name() -> None:
    with pytest.raises(TypeError, match="'Mars/Olympus' is unknown"):
        load_zone("Mars/Olympus")
    with pytest.raises(TypeError, match="must be UTC or an IANA Area/Location name, got 'EST'"):
        load_zone("EST")
    with pytest.raises(ValueError, match="Mars/Olympus"):
        Config(timeZone="Mars/Olympus")
    with pytest.raises(ValueError, match="refreshIntervalMs"):
        Config(refreshIntervalMs=-1)


async def test_the_standard_preset_logs_one_reading_after_the_snapshot(tmp_path: Path) -> None:
    host = await start_host([{"text": "one"}, {"text": "two"}], bundles=("base", "presets"))
    try:
        agent = await standard_agent(host, tmp_path)
        events = await host.run(agent, "hi", rpcId="r1", clientTimeZone="Asia/Shanghai")
        assert kinds(events) == ["user", "runtime-context", "time-context"]
        (reading,) = readings(events)
        text = reading["content"][0]["text"]
        assert re.fullmatch(
            rf"Time sampled while preparing turn 1, step 1: {STAMP}\+08:00\[Asia/Shanghai\]\n"
            r"Browser time zone for this request: Asia/Shanghai\. Interpret otherwise-unqualified dates and times "
            r"in this zone\.\nElapsed since the preceding model-visible message: unavailable\.",
            text,
        )
        assert reading["source"] == {
            "kind": "time-context",
            "form": "snapshot",
            "sections": [{"name": "time-context", "text": text}],
        }
        assert readings(await host.run(agent, "again")) == []
    finally:
        await host.close()


async def test_an_inserted_row_with_no_interval_reads_every_step(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    script = [{"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}, {"text": "done"}, {"text": "2"}]
    row = {"id": "time-context", "name": "time-context", "config": {"timeZone": "UTC", "refreshIntervalMs": 0}}
    host = await start_host(script, patches=([{"insert": [row]}],))
    try:
        agent = (await host.create(tmp_path)).agent
        first = [r["content"][0]["text"] for r in readings(await host.run(agent, "read a.txt"))]
        assert len(first) == 2
        assert first[0].startswith("Time sampled while preparing turn 1, step 1: ")
        assert first[0].endswith(
            f"+00:00[UTC]\n{UNAVAILABLE}\nElapsed since the preceding model-visible message: unavailable."
        )
        assert re.fullmatch(
            rf"Time sampled while preparing turn 1, step 2: {STAMP}\+00:00\[UTC\]\n{re.escape(UNAVAILABLE)}\n"
            r"Elapsed since the preceding step context: \d+s\.",
            first[1],
        )
        (second,) = [r["content"][0]["text"] for r in readings(await host.run(agent, "again"))]
        assert re.search(r"\nElapsed since the preceding model-visible message: \d+s\.$", second)
    finally:
        await host.close()


async def test_rosterless_profiles_mount_no_time_context(tmp_path: Path) -> None:
    assert not any(row.id == "time-context" for row in compose(["base", "agent-tools"], []).rows)
    host = await start_host([{"text": "one"}])
    try:
        events = await host.run((await host.create(tmp_path)).agent, "hi")
        assert kinds(events) == ["user", "runtime-context"]
    finally:
        await host.close()


async def test_a_resumed_session_keeps_the_interval_from_its_log(tmp_path: Path) -> None:
    host = await start_host([{"text": "one"}], bundles=("base", "presets"))
    try:
        handle = await host.create(tmp_path, agent_preset="standard", setup=preset_setup(host.kernel.ctx))
        assert len(readings(await host.run(handle.agent, "hi"))) == 1
        session_id = handle.agent.session.id
        await handle.dispose()
    finally:
        await host.close()
    again = await start_host([{"text": "two"}], bundles=("base", "presets"))
    try:
        handle = await again.agents.resume(session_id, setup=preset_setup(again.kernel.ctx))
        assert readings(await again.run(handle.agent, "again")) == []
        await handle.dispose()
    finally:
        await again.close()
