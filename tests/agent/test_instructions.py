"""``agent-instructions``: discovery order, logged baseline, updates, budget marker and resume (spec 01 §11).

Expected texts and source shapes are those the reference runtime logged for the same files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pytest

from pydsh.agent.instructions import Budget, Config, InstructionFile, Instructions, baseline_section, scope_key
from pydsh.kernel.context import Context
from pydsh.kernel.errors import KernelError
from pydsh.kernel.plugin import resolve_plugin, validate_config
from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer
from tests.agent.harness import Host, compose, start_host

FRAME = "<system-reminder>\n{}\n</system-reminder>"
GUIDANCE = (
    "The following workspace instructions may be relevant to your work. Use them as guidance when applicable. "
    "More specific instructions take precedence over broader ones. They do not override system, developer, or "
    "direct user instructions."
)
IDENTITY = (
    '{"projectRoot":"../..","projectRootMarkers":[".git"],"maxBytes":65536,"maxSourceBytes":1048576,'
    '"instructionFileCandidates":["AGENTS.md","CLAUDE.md"],"localInstructionFileCandidates":'
    '["AGENTS.local.md","CLAUDE.local.md"]}'
)


def project(tmp_path: Path, home: Path) -> Path:
    """A project with a ``.git`` marker, files at three levels and a home file; returns the working directory."""
    root = tmp_path / "proj"
    cwd = root / "pkg" / "sub"
    cwd.mkdir(parents=True)
    (root / ".git").mkdir()
    (home / "AGENTS.md").write_text("home rules\n")
    (root / "AGENTS.md").write_text("project rules\n")
    (root / "CLAUDE.md").write_text("claude rules\n")
    (root / "pkg" / "AGENTS.md").write_text("pkg rules\n")
    (cwd / "AGENTS.md").write_text("sub rules\n")
    (tmp_path / "AGENTS.md").write_text("above the project root: never read\n")
    return cwd


def instruction_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["data"] for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == "agent-instructions"
    ]


def user_kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["source"]["kind"] for e in events if e["type"] == "user/message"]


def text(message: dict[str, Any]) -> str:
    return "".join(b["text"] for b in message["content"])


async def host_for(scripts: list[Any], **config: Any) -> Host:
    if not config:
        return await start_host(scripts)
    patch = {"id": "agent-instructions", "config": {"maxBytes": 65536, **config}}
    return await start_host(scripts, patches=([patch],))


async def test_baseline_lists_home_then_root_down_to_cwd_after_the_prompt(tmp_path: Path, isolated_home: Path) -> None:
    cwd = project(tmp_path, isolated_home)
    host = await host_for([{"text": "one"}])
    try:
        agent = (await host.create(cwd)).agent
        events = await host.run(agent, "hi")
        assert user_kinds(events) == ["user", "agent-instructions", "runtime-context"]
        (message,) = instruction_messages(events)
        sections = [
            "Instructions from: $DSH_HOME/AGENTS.md\n\nhome rules\n",
            "Instructions from: AGENTS.md\n\nproject rules\n",
            "Instructions from: CLAUDE.md\n\nclaude rules\n",
            "Instructions from: pkg/AGENTS.md\n\npkg rules\n",
            "Instructions from: pkg/sub/AGENTS.md\n\nsub rules\n",
        ]
        assert text(message) == FRAME.format("\n\n".join([GUIDANCE, *sections]))
        source = message["source"]
        assert list(source) == ["kind", "form", "baseline", "baselineIdentity", "changes"]
        assert (source["form"], source["baseline"], source["baselineIdentity"]) == ("instructions", True, IDENTITY)
        assert source["changes"] == [
            {
                "action": "set",
                "scope": "user-global\0AGENTS.md",
                "path": "$DSH_HOME/AGENTS.md",
                "digest": "cf463e820c3ee6ac45e75bae6ce24e3d02bd2db4",
            },
            {
                "action": "set",
                "scope": ".\0AGENTS.md",
                "path": "AGENTS.md",
                "digest": "c12e18d255f3d0242e8b32f5d8ad583e0fbc5307",
            },
            {
                "action": "set",
                "scope": ".\0CLAUDE.md",
                "path": "CLAUDE.md",
                "digest": "ebc25c9105fd8deeb05b6e58a24a5eca9d278bfb",
            },
            {
                "action": "set",
                "scope": "pkg\0AGENTS.md",
                "path": "pkg/AGENTS.md",
                "digest": "3fe4348bbf9d00434cc8f67db1d55dadcb404b2e",
            },
            {
                "action": "set",
                "scope": "pkg/sub\0AGENTS.md",
                "path": "pkg/sub/AGENTS.md",
                "digest": "a3188c41bcf76aafe5fc976a4f03033e3e96b94a",
            },
        ]
    finally:
        await host.close()


async def test_a_changed_file_appends_one_update_and_unchanged_files_append_nothing(
    tmp_path: Path, isolated_home: Path
) -> None:
    cwd = project(tmp_path, isolated_home)
    host = await host_for([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    try:
        agent = (await host.create(cwd)).agent
        await host.run(agent, "hi")
        prefix = json.dumps(agent.session.derive_messages())
        (cwd / "AGENTS.md").write_text("sub rules changed\n")
        second = await host.run(agent, "again")
        assert user_kinds(second) == ["user", "agent-instructions"]
        (update,) = instruction_messages(second)
        assert text(update) == (
            "<system-reminder>\nUpdated instructions from: pkg/sub/AGENTS.md\n\nThis file changed after it was "
            "loaded. Use the following content instead of the previously loaded instructions from this file.\n\n"
            "sub rules changed\n\n</system-reminder>"
        )
        assert update["source"] == {
            "kind": "agent-instructions",
            "form": "instructions",
            "changes": [
                {
                    "action": "replace",
                    "scope": "pkg/sub\0AGENTS.md",
                    "path": "pkg/sub/AGENTS.md",
                    "digest": "8122caaeded2cd9d301402120883258505ab4558",
                }
            ],
        }
        assert json.dumps(agent.session.derive_messages()).startswith(prefix[:-1])
        third = await host.run(agent, "third")
        assert user_kinds(third) == ["user"]
    finally:
        await host.close()


async def test_added_and_removed_files_are_announced_by_scope(tmp_path: Path, isolated_home: Path) -> None:
    cwd = project(tmp_path, isolated_home)
    host = await host_for([{"text": "one"}, {"text": "two"}])
    try:
        agent = (await host.create(cwd)).agent
        await host.run(agent, "hi")
        (tmp_path / "proj" / "CLAUDE.md").unlink()
        (cwd / "CLAUDE.local.md").write_text("local rules\n")
        (update,) = instruction_messages(await host.run(agent, "again"))
        assert text(update) == FRAME.format(
            "Additional instructions from: pkg/sub/CLAUDE.local.md\n\nThese instructions apply to work under "
            "`pkg/sub`. Use them as guidance when relevant; more specific instructions take precedence. They do "
            "not override system, developer, or direct user instructions.\n\nlocal rules\n\n\n"
            "Instructions removed: CLAUDE.md\n\nThe previously loaded instructions from this file no longer apply."
        )
        assert [(c["action"], c["path"]) for c in update["source"]["changes"]] == [
            ("set", "pkg/sub/CLAUDE.local.md"),
            ("remove", "CLAUDE.md"),
        ]
        assert "digest" not in update["source"]["changes"][1]
    finally:
        await host.close()


async def test_resume_appends_nothing_unchanged_and_the_update_when_a_file_changed(
    tmp_path: Path, isolated_home: Path
) -> None:
    cwd = project(tmp_path, isolated_home)
    host = await host_for([{"text": "one"}])
    try:
        handle = await host.create(cwd)
        await host.run(handle.agent, "hi")
        session_id = handle.agent.session.id
        await handle.dispose()
    finally:
        await host.close()
    for prompt, change in (("after resume", None), ("after an edit", "home rules, edited\n")):
        if change is not None:
            (isolated_home / "AGENTS.md").write_text(change)
        again = await host_for([{"text": "resumed"}])
        try:
            handle = await again.agents.resume(session_id)
            events = await again.run(handle.agent, prompt)
            updates = instruction_messages(events)
            if change is None:
                assert updates == []
            else:
                assert [c["path"] for c in updates[0]["source"]["changes"]] == ["$DSH_HOME/AGENTS.md"]
                assert "home rules, edited" in text(updates[0])
            await handle.dispose()
        finally:
            await again.close()


async def test_files_below_the_working_directory_join_once_the_model_works_there(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("root rules\n")
    deep = tmp_path / "pkg" / "deep"
    deep.mkdir(parents=True)
    (tmp_path / "pkg" / "AGENTS.md").write_text("pkg rules\n")
    (deep / "CLAUDE.md").write_text("deep rules\n")
    (deep / "mod.py").write_text("x = 1\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "AGENTS.md").write_text("never touched\n")
    read = {"tool_calls": [{"name": "read", "arguments": {"file_path": "pkg/deep/mod.py"}}]}
    missing = {"tool_calls": [{"name": "read", "arguments": {"file_path": "other/missing.py"}}]}
    host = await host_for([read, {"text": "done"}, missing, {"text": "done"}, {"text": "three"}])
    try:
        agent = (await host.create(tmp_path)).agent
        events = await host.run(agent, "read it")
        baseline, nested = instruction_messages(events)
        assert [c["path"] for c in baseline["source"]["changes"]] == ["AGENTS.md"]
        assert text(nested) == FRAME.format(
            "Additional instructions from: pkg/AGENTS.md\n\nThese instructions apply to work under `pkg`. Use them "
            "as guidance when relevant; more specific instructions take precedence. They do not override system, "
            "developer, or direct user instructions.\n\npkg rules\n\n\nAdditional instructions from: "
            "pkg/deep/CLAUDE.md\n\nThese instructions apply to work under `pkg/deep`. Use them as guidance when "
            "relevant; more specific instructions take precedence. They do not override system, developer, or "
            "direct user instructions.\n\ndeep rules\n"
        )
        assert [c["scope"] for c in nested["source"]["changes"]] == ["pkg\0AGENTS.md", "pkg/deep\0CLAUDE.md"]
        seqs = {e["type"] if e["data"] is not nested else "nested": e["seq"] for e in events}
        assert seqs["tool/result"] < seqs["step/start"] < seqs["nested"]
        assert instruction_messages(await host.run(agent, "a failed read reveals nothing")) == []
        (deep / "CLAUDE.md").unlink()
        (removed,) = instruction_messages(await host.run(agent, "three"))
        assert removed["source"]["changes"] == [
            {"action": "remove", "scope": "pkg/deep\0CLAUDE.md", "path": "pkg/deep/CLAUDE.md"}
        ]
    finally:
        await host.close()


async def test_without_a_root_marker_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("parent\n")
    cwd = tmp_path / "child"
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text("child\n")
    host = await host_for([{"text": "one"}])
    try:
        (message,) = instruction_messages(await host.run((await host.create(cwd)).agent, "hi"))
        assert [c["path"] for c in message["source"]["changes"]] == ["CLAUDE.md"]
        assert '"projectRoot":""' in message["source"]["baselineIdentity"]
    finally:
        await host.close()


async def test_no_files_no_message(tmp_path: Path) -> None:
    host = await host_for([{"text": "one"}])
    try:
        events = await host.run((await host.create(tmp_path)).agent, "hi")
        assert user_kinds(events) == ["user", "runtime-context"]
    finally:
        await host.close()


async def test_configured_candidates_and_a_small_budget_mark_what_was_cut(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "RULES.md").write_text("broad " * 40)
    (tmp_path / "AGENTS.md").write_text("ignored: not a candidate\n")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "RULES.md").write_text("x" * 500)
    host = await host_for([{"text": "one"}], maxBytes=400, instructionFileCandidates=["RULES.md"])
    try:
        (message,) = instruction_messages(await host.run((await host.create(inner)).agent, "hi"))
        body = text(message)
        assert len(body.encode()) <= 400
        kept = len(body.split("Instructions from: inner/RULES.md\n\n", 1)[1].removesuffix("\n</system-reminder>"))
        assert body.startswith(
            f"<system-reminder>\nWorkspace instruction budget 400 bytes: omitted RULES.md; truncated "
            f"inner/RULES.md from 500 to {kept} bytes\n\n"
        )
        assert 0 < kept < 500
        assert [c["path"] for c in message["source"]["changes"]] == ["inner/RULES.md"]
    finally:
        await host.close()


async def test_oversized_files_and_directories_named_like_candidates_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 11)
    (tmp_path / "CLAUDE.md").mkdir()
    (tmp_path / "AGENTS.local.md").write_text("small\n")
    host = await host_for([{"text": "one"}], maxSourceBytes=10)
    try:
        (message,) = instruction_messages(await host.run((await host.create(tmp_path)).agent, "hi"))
        assert [c["path"] for c in message["source"]["changes"]] == ["AGENTS.local.md"]
    finally:
        await host.close()


def test_budget_drops_the_broadest_file_first_and_keeps_what_fits() -> None:
    def item(display: str, content: str) -> InstructionFile:
        return InstructionFile(f"/p/{display}", display, scope_key(display), content)

    files = [item("AGENTS.md", "a" * 100), item("sub/AGENTS.md", "b" * 10)]
    whole = Budget(10_000, "intro", baseline_section).render(files)
    assert whole.represented == files
    assert whole.text == FRAME.format(
        f"intro\n\nInstructions from: AGENTS.md\n\n{'a' * 100}\n\nInstructions from: sub/AGENTS.md\n\n{'b' * 10}"
    )
    limit = len(whole.text.encode()) - 1
    dropped = Budget(limit, "intro", baseline_section).render(files)
    assert dropped.represented == files[1:]
    assert dropped.text.startswith(
        f"<system-reminder>\nWorkspace instruction budget {limit} bytes: omitted AGENTS.md\n\nintro"
    )
    assert Budget(20, "intro", baseline_section).render(files).represented == []


def test_candidates_must_be_plain_file_names() -> None:
    with pytest.raises(ValueError, match=re.escape("'docs/AGENTS.md' is not a plain file name in one directory")):
        Config(maxBytes=10, instructionFileCandidates=["docs/AGENTS.md"])


def shipped_rows(bundles: list[str]) -> dict[str, dict[str, Any]]:
    """Rows by id of a composition, the standard preset's own rows included."""
    rows: dict[str, dict[str, Any]] = {}
    for row in compose(bundles, []).rows:
        rows[row.id] = {"disabled": row.disabled, "config": row.config}
        if row.id == "preset-standard":
            rows.update({f"standard/{p['id']}": p for p in row.config["plugins"]})
    return rows


def test_agent_instructions_is_on_in_every_shipped_profile() -> None:
    rosterless = shipped_rows(["base", "agent-tools"])["agent-instructions"]
    assert rosterless == {"disabled": False, "config": {"maxBytes": 65536}}
    standard = shipped_rows(["base", "presets"])["standard/agent-instructions"]
    assert not standard.get("disabled") and standard["config"] == {"maxBytes": 65536}


def test_a_bad_row_config_is_one_error_naming_the_field() -> None:
    with pytest.raises(KernelError, match=r'row "agent-instructions" \(agent-instructions\): maxBytes: '):
        validate_config("agent-instructions", resolve_plugin("agent-instructions"), {"maxBytes": -1})


async def test_the_sdk_process_shows_the_model_instructions_and_skills_in_the_reference_order(
    tmp_path: Path, isolated_home: Path
) -> None:
    cwd = project(tmp_path, isolated_home)
    skill = tmp_path / "proj" / ".agents" / "skills" / "lint.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: lint\ndescription: Run the linters.\n---\nRun ruff.\n")
    async with (
        MockModelServer(sequence=[{"text": "one"}, {"text": "two"}]) as server,
        AsyncHarness(base_url=server.base_url, cwd=cwd, dsh_home=isolated_home, api_key="sk-test") as harness,
    ):
        session = harness.session("s1")
        first = await session.run("hi")
        second = await session.run("again")
    kinds = [e["data"]["source"]["kind"] for e in first.events if e["type"] == "user/message"]
    assert kinds == ["user", "agent-instructions", "runtime-context", "skill-catalog"]
    assert [e["data"]["source"]["kind"] for e in second.events if e["type"] == "user/message"] == ["user"]
    first_request, second_request = (json.dumps(r["body"]["messages"]) for r in server.requests)
    assert json.dumps("Instructions from: pkg/sub/AGENTS.md\n\nsub rules\n")[1:-1] in first_request
    assert json.dumps("- `lint`: Run the linters.")[1:-1] in first_request
    assert second_request.count("Instructions from: $DSH_HOME/AGENTS.md") == 1


def test_the_baseline_identity_follows_the_working_directory_and_root() -> None:
    """Kept per directory pair (every step asks), it still names each pair's own root."""
    instructions = Instructions(cast(Context, None), Config(maxBytes=100))
    below = instructions.identity("/w/sub", "/w")
    at_root = instructions.identity("/w", "/w")
    assert (json.loads(below)["projectRoot"], json.loads(at_root)["projectRoot"]) == ("..", "")
    assert instructions.identity("/w/sub", "/w") == below
