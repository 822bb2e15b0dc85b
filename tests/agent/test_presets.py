"""Agent presets: roster, generations, joins, realm audit, unjoined warning and invariant (spec 10 §1, §5)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import AGENT_CREATED, AGENT_ERROR
from pydsh.agent.keys import AGENT_PRESETS, SYSTEM_PROMPT
from pydsh.agent.presets import AgentPresets, RemoteError, preset_setup, resolve_session_preset
from pydsh.contract.tools import TOOLS, TOOLS_CHANGED
from pydsh.kernel.compose import resolve_rows
from pydsh.kernel.fiber import ACTIVE, DISPOSED
from pydsh.kernel.invariants import InvariantError
from pydsh.kernel.keys import ServiceKey
from pydsh.session.keys import SESSION_PROJECTIONS
from pydsh.testing.fixtures import Violations
from tests.agent.harness import Host, compose, start_host, types
from tests.agent.preset_plugins import LATE, Widget
from tests.subagents.helpers import calls, deleg, quiesce

ROSTER = ("base", "presets")


def declaration(row_id: str, preset_id: str, plugins: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"id": row_id, "name": "agent-preset", "config": {"id": preset_id, "plugins": plugins, **extra}}


def compose_rows(patch: list[dict[str, Any]]) -> list[Any]:
    return resolve_rows(compose([], [patch]).rows)


def roster(host: Host) -> AgentPresets:
    return host.kernel.ctx.require(AGENT_PRESETS)  # type: ignore[no-any-return]


async def joined(host: Host, tmp_path: Path, preset: str | None = None) -> Any:
    handle = await host.create(tmp_path, agent_preset=preset or "standard", setup=preset_setup(host.kernel.ctx))
    return handle.agent


def unjoined_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "without joining an agent preset" in r.getMessage()]


async def test_roster_lists_the_shipped_presets_in_order(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        presets = roster(host)
        assert [p["id"] for p in presets.list()] == ["standard", "minimal"]
        assert not any("broken" in p for p in presets.list())
        assert presets.default_id == "standard"
        assert presets.resolve() == {"id": "standard"}
        with pytest.raises(RemoteError, match="Unknown agent preset: nope") as info:
            presets.resolve("nope")
        assert info.value.code == "agent-preset/not-found"
        assert "persistent-bash" in presets.read_document("minimal")
    finally:
        await host.close()


async def test_a_unjoined_agent_is_warned_once_and_fails_at_its_first_assembly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, violations: Violations
) -> None:
    host = await start_host([{"text": "never"}], bundles=ROSTER)
    try:
        with caplog.at_level(logging.WARNING):
            agent = (await host.create(tmp_path)).agent
        assert unjoined_warnings(caplog) == [
            f'agent "{agent.id}" was published without joining an agent preset; its tools, prompt sections, and '
            "skill catalog resolve against the empty global layer (join through agent_presets.mount() or "
            "compose_from() in the agent factory setup)"
        ]
        errors: list[BaseException] = []
        host.kernel.ctx.on(AGENT_ERROR, lambda p: errors.append(p["error"]))
        events = await host.run(agent, "hi")
        assert "request/header" not in types(events)
        assert isinstance(errors[0], InvariantError)
        assert "addressed a model without joining any agent preset while a roster is composed" in str(errors[0])
        assert events[-1]["data"]["reason"]["kind"] == "error"
        assert violations.take() == [str(errors[0])]
    finally:
        with pytest.raises(ExceptionGroup):
            await host.close()


async def test_b_a_joined_agent_gets_the_preset_plane(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = await start_host([{"text": "done"}], bundles=ROSTER)
    try:
        with caplog.at_level(logging.WARNING):
            agent = await joined(host, tmp_path)
        assert unjoined_warnings(caplog) == []
        assert roster(host).composed_preset(agent.ctx) == "standard"
        events = await host.run(agent, "hi")
        assert events[-1]["data"]["reason"]["kind"] == "completed"
        tools = {t["name"] for t in agent.session.request_header()["tools"]}
        assert {"bash", "read", "write", "edit", "glob", "grep", "subagent", "todo_write"} <= tools
    finally:
        await host.close()


async def test_minimal_sees_only_its_persona_and_its_two_tools(tmp_path: Path) -> None:
    host = await start_host([{"text": "done"}], bundles=ROSTER)
    try:
        agent = await joined(host, tmp_path, "minimal")
        await host.run(agent, "hi")
        header = agent.session.request_header()
        assert sorted(t["name"] for t in header["tools"]) == ["bash", "str_replace_editor"]
        system = next(e for e in agent.session.events if e["type"] == "system/message")
        assert system["data"]["message"]["content"] == [
            {"type": "text", "text": "You are a helpful software engineer assistant."}
        ]
        assert resolve_session_preset(agent.session) == "minimal"
    finally:
        await host.close()


async def test_c_rosterless_profiles_warn_and_fail_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    host = await start_host([{"text": "done"}])
    try:
        with caplog.at_level(logging.WARNING):
            agent = (await host.create(tmp_path, setup=preset_setup(host.kernel.ctx))).agent
        events = await host.run(agent, "hi")
        assert unjoined_warnings(caplog) == []
        assert events[-1]["data"]["reason"]["kind"] == "completed"
        with pytest.raises(RemoteError) as info:
            await joined(host, tmp_path, "standard")
        assert str(info.value).startswith("the deployment composes no agent preset roster, so session ")
        assert str(info.value).endswith(' cannot run preset "standard"')
    finally:
        await host.close()


async def test_d_children_join_their_parents_generation(tmp_path: Path) -> None:
    host = await start_host([calls(deleg()), {"text": "child done"}, {"text": "parent done"}], bundles=ROSTER)
    try:
        parent = await joined(host, tmp_path, "minimal")
        presets = roster(host)
        direct = await host.create(tmp_path, setup=lambda ctx, _a: presets.compose_from(ctx, parent.ctx))
        assert presets.composed_preset(direct.agent.ctx) == "minimal"
        scopes = host.kernel.runtime.scopes
        assert scopes.parent_of(direct.agent) is scopes.parent_of(parent)
        with pytest.raises(RemoteError, match="Child already joined a preset"):
            presets.compose_from(direct.agent.ctx, parent.ctx)
        rosterless_parent = await host.create(tmp_path, agent_preset=None)
        orphan = await host.create(tmp_path)
        assert presets.compose_from(orphan.agent.ctx, rosterless_parent.agent.ctx) is None
    finally:
        await host.close()


async def test_d_a_delegated_child_runs_the_parents_preset(tmp_path: Path) -> None:
    host = await start_host([calls(deleg()), {"text": "child done"}, {"text": "parent done"}], bundles=ROSTER)
    try:
        parent = await joined(host, tmp_path, "standard")
        presets = roster(host)
        scopes = host.kernel.runtime.scopes
        seen: list[tuple[str | None, str | None, bool]] = []

        def created(payload: dict[str, Any]) -> None:
            child = payload["agent"]
            if child is not parent:
                same = scopes.parent_of(child) is scopes.parent_of(parent)
                seen.append((presets.composed_preset(child.ctx), child.session.header.get("agentPreset"), same))

        host.kernel.ctx.on(AGENT_CREATED, created)
        await host.run(parent, "delegate")
        await quiesce(host)
        assert seen == [("standard", "standard", True)]
    finally:
        await host.close()


async def test_e_a_minimal_only_process_still_exposes_the_meter_units(tmp_path: Path) -> None:
    patch = [{"id": "preset-standard", "remove": True}, {"id": "agent-presets", "config": {"default": "minimal"}}]
    host = await start_host([{"text": "done"}], bundles=ROSTER, patches=(patch,))
    try:
        assert [p["id"] for p in roster(host).list()] == ["minimal"]
        agent = await joined(host, tmp_path, "minimal")
        await host.run(agent, "hi")
        snapshot = host.kernel.ctx.require(SESSION_PROJECTIONS).snapshot(agent.session)
        assert {"tokenUsage", "contextPressure", "contextBreakdown"} <= set(snapshot["values"])
        assert snapshot["values"]["tokenUsage"]["uncachedInputTokens"] > 0
    finally:
        await host.close()


async def test_f_a_preset_service_outside_an_isolate_realm_breaks_the_preset(tmp_path: Path) -> None:
    bare = declaration("preset-bare", "bare", [{"id": "widget", "name": "tests.agent.preset_plugins:provider"}])
    isolated = declaration(
        "preset-isolated",
        "isolated",
        [
            {
                "id": "g",
                "name": "pydsh:group",
                "isolate": {"widget": True},
                "config": [{"id": "widget", "name": "tests.agent.preset_plugins:provider"}],
            }
        ],
    )
    host = await start_host([{"text": "done"}], bundles=ROSTER, patches=([{"insert": [bare, isolated]}],))
    try:
        presets = roster(host)
        listed = {p["id"]: p for p in presets.list()}
        assert "publishes process-global service(s) [widget]" in listed["bare"]["broken"]
        assert "broken" not in listed["isolated"]
        with pytest.raises(RemoteError, match='agent preset "bare" is broken') as info:
            await joined(host, tmp_path, "bare")
        assert info.value.code == "agent-preset/invalid"
        agent = await joined(host, tmp_path, "isolated")
        own = presets.service_for(agent, ServiceKey("widget"))
        assert isinstance(own, Widget)
        assert own is not host.kernel.ctx.get(ServiceKey("widget"))
    finally:
        await host.close()


async def test_rows_that_never_activate_break_the_preset_with_one_line_each() -> None:
    rows = [
        {"id": "ghost", "name": "no-such-plugin"},
        {"id": "bad", "name": "tool-bash", "config": {"defaultTimeoutMs": "soon"}},
    ]
    host = await start_host([], bundles=ROSTER, patches=([{"insert": [declaration("preset-x", "x", rows)]}],))
    try:
        broken = roster(host).resolve("x")["broken"].splitlines()
        assert len(broken) == 2
        assert broken[0].startswith('row "ghost"') and broken[1].startswith('row "bad"')
    finally:
        await host.close()


async def test_a_service_published_after_the_audit_fails_the_invariant(violations: Violations) -> None:
    LATE.clear()
    rows = [{"id": "late", "name": "tests.agent.preset_plugins:late_provider"}]
    host = await start_host([], bundles=ROSTER, patches=([{"insert": [declaration("preset-late", "late", rows)]}],))
    try:
        assert roster(host).resolve("late") == {"id": "late"}
        with pytest.raises(
            InvariantError,
            match=r'preset "late" published process-global service\(s\) \[gadget\] '
            r'after its mount was audited \(observed while notifying "gadget"\)',
        ):
            LATE[0].provide(ServiceKey("gadget"), object())
        assert len(violations.take()) == 1
    finally:
        with pytest.raises(ExceptionGroup):
            await host.close()


async def test_duplicate_preset_ids_fail_the_second_registration() -> None:
    dup = declaration("preset-standard-2", "standard", [])
    host = await start_host([], bundles=ROSTER, patches=([{"insert": [dup]}],))
    try:
        failed = [f for f in host.kernel.loader.failures if f.row_id == "preset-standard-2"]
        assert [str(f.error) for f in failed] == ["Duplicate agent preset: standard"]
    finally:
        await host.close()


async def test_select_switches_a_blank_session_and_locks_once_started(tmp_path: Path) -> None:
    host = await start_host([{"text": "done"}], bundles=ROSTER)
    try:
        agent = await joined(host, tmp_path, "standard")
        presets = roster(host)
        await presets.select(agent, "minimal")
        await presets.select(agent, "minimal")
        selected = [e for e in agent.session.events if e["type"] == "agent-preset/selected"]
        assert [e["data"] for e in selected] == [{"agentPreset": "minimal"}]
        assert presets.composed_preset(agent.ctx) == "minimal"
        assert resolve_session_preset(agent.session) == "minimal"
        await host.run(agent, "hi")
        assert sorted(t["name"] for t in agent.session.request_header()["tools"]) == ["bash", "str_replace_editor"]
        with pytest.raises(RemoteError, match="This session has already started") as info:
            await presets.select(agent, "standard")
        assert info.value.code == "agent-preset/locked"
    finally:
        await host.close()


async def test_a_retired_generation_is_kept_while_joined_then_unloaded(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        handle = await host.create(tmp_path, agent_preset="minimal", setup=preset_setup(host.kernel.ctx))
        presets = roster(host)
        generation = presets._joined[handle.agent]
        row = next(f for f in host.kernel.fiber.children if f.row_id == "preset-minimal")
        await host.kernel.loader.dispose(row)
        assert generation.retired and generation.fiber.state == ACTIVE
        assert [p["id"] for p in presets.list()] == ["standard"]
        await handle.dispose()
        await host.kernel.loader.settle()
        for _ in range(3):
            await asyncio.sleep(0)
        assert generation.fiber.state == DISPOSED
    finally:
        await host.close()


async def test_a_changed_declaration_mounts_a_new_generation_for_new_sessions(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        presets = roster(host)
        old_agent = await joined(host, tmp_path, "minimal")
        old = presets._joined[old_agent]
        row_fiber = next(f for f in host.kernel.fiber.children if f.row_id == "preset-minimal")
        await host.kernel.loader.dispose(row_fiber)
        plugins = [{"id": "persona", "name": "persona", "config": {"prefix": "Second generation.", "complete": True}}]
        comp = compose_rows([{"insert": [declaration("preset-minimal-2", "minimal", plugins)]}])
        await host.kernel.load(comp)
        new_agent = await joined(host, tmp_path, "minimal")
        new = presets._joined[new_agent]
        assert new is not old and new.key is not old.key
        assert old.fiber.state == ACTIVE and old.retired
        child = await host.create(tmp_path, setup=lambda ctx, _a: presets.compose_from(ctx, old_agent.ctx))
        assert presets._joined[child.agent] is old
        prompt = host.kernel.ctx.require(SYSTEM_PROMPT)
        old_text = prompt.render(await prompt.assemble(agent=old_agent))
        new_text = prompt.render(await prompt.assemble(agent=new_agent))
        assert old_text == "You are a helpful software engineer assistant."
        assert new_text == "Second generation."
    finally:
        await host.close()


async def test_a_child_of_an_unloaded_generation_cannot_join(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        presets = roster(host)
        parent = await joined(host, tmp_path, "minimal")
        await host.kernel.loader.dispose(presets._joined[parent].fiber)
        with pytest.raises(RemoteError, match="Parent preset revision is unavailable"):
            await host.create(tmp_path, setup=lambda ctx, _a: presets.compose_from(ctx, parent.ctx))
    finally:
        await host.close()


async def test_recompose_rebinds_and_announces_the_tool_change(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        presets = roster(host)
        bare = (await host.create(tmp_path)).agent
        changes: list[int] = []
        host.kernel.ctx.on(TOOLS_CHANGED, lambda: changes.append(1))
        await presets.recompose(bare.ctx, "minimal")
        assert presets.composed_preset(bare.ctx) == "minimal"
        assert changes
        tools = host.kernel.ctx.require(TOOLS)
        assert tools.lookup(bare, "str_replace_editor") is not None
    finally:
        await host.close()


async def test_the_agent_preset_unit_follows_header_and_selection(tmp_path: Path) -> None:
    host = await start_host([], bundles=ROSTER)
    try:
        agent = await joined(host, tmp_path, "standard")
        projections = host.kernel.ctx.require(SESSION_PROJECTIONS)
        assert projections.snapshot(agent.session, ["agentPreset"])["values"] == {
            "agentPreset": {"agentPreset": "standard"}
        }
        await roster(host).select(agent, "minimal")
        assert projections.state_of(agent.session, "agentPreset") == "minimal"
    finally:
        await host.close()
