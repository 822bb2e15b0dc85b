"""Presets, start-up policy events and the runtime-context texts (spec 05 §5.1–5.3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import AGENT_CREATED
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.kernel import Kernel
from pydsh.kernel.compose import SHIPPED, interpolate, read_yaml_file
from pydsh.policy.keys import PERMISSIONS
from pydsh.policy.permissions import Permissions
from pydsh.session.events import make_header
from tests.tools.harness import BASE, FS, POLICY, Harness, harness, rows_of

START = ("permission/preset", "sandbox/mode", "approval/policy")


def shipped_permission_config() -> Any:
    """The ``permission`` row config of the shipped base bundle, interpolated like at start-up."""
    bundle = read_yaml_file(SHIPPED / "base.yml")
    row = next(r for op in bundle for r in op["insert"] if r["id"] == "permission")
    return interpolate(row["config"], "base.yml")


def data_of(h: Harness) -> list[tuple[str, Any]]:
    return [(e["type"], e["data"]) for e in h.events(*START)]


@pytest.mark.parametrize(
    ("env", "preset", "mode", "policy"),
    [
        (None, "workspace-write", "workspace-write", "ask"),
        ("read-only", "read-only", "read-only", "ask"),
        ("workspace-write", "workspace-write", "workspace-write", "ask"),
        ("danger-full-access", "danger-full-access", "danger-full-access", "never"),
    ],
)
async def test_start_events_follow_dsh_permission_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, preset: str, mode: str, policy: str
) -> None:
    if env is not None:
        monkeypatch.setenv("DSH_PERMISSION_MODE", env)
    plugins = [*POLICY[:2], ("permission", shipped_permission_config())]
    h = await harness(tmp_path, plugins, startup=True, open_turn=False)
    try:
        assert [e["seq"] for e in h.events()] == [0, 1, 2]
        assert data_of(h) == [
            ("permission/preset", {"preset": preset}),
            ("sandbox/mode", {"mode": mode}),
            ("approval/policy", {"policy": policy}),
        ]
    finally:
        await h.close()


async def test_invalid_mode_fails_start_up_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_PERMISSION_MODE", "yolo")
    kernel = Kernel()
    await kernel.load(rows_of([*BASE, ("permission", shipped_permission_config())]))
    try:
        (failed,) = kernel.loader.failures
        assert failed.row_id == "permission"
        assert "DSH_PERMISSION_MODE" in str(failed.error)
        assert '"yolo"' in str(failed.error)
        assert kernel.ctx.get(PERMISSIONS) is None
    finally:
        await kernel.dispose()


@pytest.mark.parametrize(
    ("source", "header"),
    [
        ("resume", {}),
        ("startup", {"origin": "subagent", "parent_session": "p", "delegation_depth": 1}),
    ],
)
async def test_no_start_events_for_resume_or_children(tmp_path: Path, source: str, header: dict[str, Any]) -> None:
    h = await harness(tmp_path, POLICY, open_turn=False, header=make_header("c-1", 1, cwd=str(tmp_path), **header))
    try:
        await h.kernel.ctx.serial(AGENT_CREATED, {"agent": h.agent, "source": source, "signal": None}, scope=h.agent)
        assert h.events() == []
    finally:
        await h.close()


async def test_existing_policy_events_are_not_repeated(tmp_path: Path) -> None:
    h = await harness(tmp_path, POLICY, open_turn=False)
    try:
        h.session.append("sandbox/mode", {"mode": "read-only", "source": "delegation"})
        await h.kernel.ctx.serial(AGENT_CREATED, {"agent": h.agent, "source": "startup", "signal": None}, scope=h.agent)
        assert len(h.events()) == 1
    finally:
        await h.close()


async def test_switching_presets(tmp_path: Path) -> None:
    h = await harness(tmp_path, POLICY, startup=True, open_turn=False)
    try:
        permissions: Permissions = h.kernel.ctx.require(PERMISSIONS)
        permissions.set_permission_preset(h.agent, "workspace-write")  # type: ignore[arg-type]
        assert len(h.events()) == 3
        permissions.set_permission_preset(h.agent, "read-only")  # type: ignore[arg-type]
        assert data_of(h)[3:] == [
            ("permission/preset", {"preset": "read-only"}),
            ("sandbox/mode", {"mode": "read-only"}),
        ]
        assert h.agent.injected == []
        permissions.set_permission_preset(h.agent, "danger-full-access")  # type: ignore[arg-type]
        assert data_of(h)[5:] == [
            ("permission/preset", {"preset": "danger-full-access"}),
            ("sandbox/mode", {"mode": "danger-full-access"}),
            ("approval/policy", {"policy": "never"}),
        ]
        (note,) = h.agent.injected
        assert note["content"] == [
            {"type": "text", "text": 'The approval policy changed from "ask" to "never" (changed by the user).'}
        ]
        assert note["source"] == {"kind": "user-approval"}
        assert permissions.preset(h.agent) == "danger-full-access"  # type: ignore[arg-type]
        h.session.append("approval/policy", {"policy": "ask"})
        assert permissions.preset(h.agent) == "custom"  # type: ignore[arg-type]
        with pytest.raises(ValueError, match='unknown permission preset "custom"'):
            permissions.set_permission_preset(h.agent, "custom")  # type: ignore[arg-type]
    finally:
        await h.close()


async def test_runtime_context_sections(tmp_path: Path) -> None:
    h = await harness(tmp_path, FS + POLICY, startup=True)
    try:
        system_prompt = h.kernel.ctx.require(SYSTEM_PROMPT)

        async def sections() -> list[dict[str, str]]:
            contexts: list[dict[str, str]] = system_prompt.render_contexts(await system_prompt.assemble(agent=h.agent))
            return contexts

        root = json.dumps(str(tmp_path.resolve()), ensure_ascii=False)
        first = await sections()
        assert [s["name"] for s in first] == ["working-directory:current", "sandbox:policy", "approval:policy"]
        assert first[1]["text"] == (
            "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may "
            f"modify files under the session workspace: {root}. Some platform temporary areas may also be writable."
        )
        h.session.append("sandbox/mode", {"mode": "read-only"})
        assert (await sections())[1]["text"] == (
            "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot "
            "modify files in the standing mode. Do not refuse a required modification from this policy alone: try "
            "an available tool normally and follow any denial and escalation guidance it returns."
        )
        h.session.append("sandbox/mode", {"mode": "danger-full-access"})
        assert (await sections())[1]["text"] == (
            "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file modifications "
            "by available operations."
        )
    finally:
        await h.close()
