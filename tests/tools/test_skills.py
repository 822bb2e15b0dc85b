"""``skill``: schema, discovery, the catalog message, results and errors (spec 05 §4.11).

Texts and source shapes are those the reference runtime logs for the same skills.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pydsh.tools.skills import Config, SkillFiles
from tests.agent.harness import Host, start_host

SCHEMA = (
    '{"name":"skill","description":"Load the full instructions for a skill. Call it before acting on a task that '
    'names or clearly matches a skill in the session skill catalog.","parameters":{"type":"object","properties":'
    '{"name":{"type":"string","description":"The exact skill name from the available skills list."}},'
    '"required":["name"]}}'
)
CATALOG = """<system-reminder>
A skill is a reusable set of task-specific instructions. The following skills are available in this session:

<available_skills>
{}
</available_skills>

If the user names a skill, or the task clearly matches a skill's description, call the `skill` tool with the exact \
skill name before taking task actions. Load all applicable skills, then follow their full instructions. This catalog \
contains summaries only; do not infer or follow a skill's instructions until it has been loaded.
A user may also invoke a skill directly; its <skill_content> block then appears in this conversation. Follow it, and \
do not call the `skill` tool again for that skill.
</system-reminder>"""
RESULT = """<skill_content name="{name}">
<skill_resources>
Base directory for this skill: {base}
Resolve relative paths mentioned by this skill against the base directory before using them. Load referenced \
resources only as needed.
</skill_resources>

<skill_instructions>
{body}
</skill_instructions>
</skill_content>"""


def skill_file(path: Path, name: str, description: str, body: str = "Body.", **extra: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    front = "".join(f"{k}: {v}\n" for k, v in {"name": name, "description": description, **extra}.items())
    path.write_text(f"---\n{front}---\n{body}\n")


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    skill_file(root / ".dsh" / "skills" / "pdf-tool" / "SKILL.md", "pdf-tool", "Work with PDF files.", "Use pdftotext.")
    skill_file(root / ".agents" / "skills" / "other.md", "other", "Other thing.", "Other body.")
    cwd = root / "src"
    cwd.mkdir()
    return cwd


def messages_of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == "user/message" and e["data"]["source"]["kind"] == kind]


def results(events: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    return [
        (e["data"]["message"]["content"][0]["text"], e["data"]["message"]["isError"])
        for e in events
        if e["type"] == "tool/result"
    ]


def call(name: str) -> dict[str, Any]:
    return {"name": "skill", "arguments": {"name": name}}


async def host_with(scripts: list[Any], **config: Any) -> Host:
    patches = ([{"id": "tool-skill", "config": config}],) if config else ()
    return await start_host(scripts, patches=patches)


def files(config: Config) -> SkillFiles:
    return SkillFiles(SimpleNamespace(logger=logging.getLogger("test.skills")), config)  # type: ignore[arg-type]


async def test_the_catalog_precedes_the_first_request_and_loads_return_the_skill(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    script = [{"tool_calls": [call("pdf-tool"), call("nope"), call("Bad_Name")]}, {"text": "done"}]
    host = await host_with(script)
    try:
        agent = (await host.create(cwd)).agent
        events = await host.run(agent, "hi")
        kinds = [e["data"]["source"]["kind"] for e in events if e["type"] == "user/message"]
        assert kinds == ["user", "runtime-context", "skill-catalog"]
        (catalog,) = messages_of(events, "skill-catalog")
        assert catalog["content"][0]["text"] == CATALOG.format(
            "- `other`: Other thing.\n- `pdf-tool`: Work with PDF files."
        )
        assert catalog["source"] == {
            "kind": "skill-catalog",
            "form": "catalog",
            "entries": [
                {"name": "other", "description": "Other thing."},
                {"name": "pdf-tool", "description": "Work with PDF files."},
            ],
        }
        base = tmp_path / "proj" / ".dsh" / "skills" / "pdf-tool"
        assert results(events) == [
            (RESULT.format(name="pdf-tool", base=base, body="Use pdftotext."), False),
            ('Error: skill "nope" is unknown or no longer available', True),
            ('Error: invalid skill name "Bad_Name"', True),
        ]
        schema = next(t for t in agent.session.request_header()["tools"] if t["name"] == "skill")
        assert json.dumps(schema, separators=(",", ":"), ensure_ascii=False) == SCHEMA
    finally:
        await host.close()


async def test_the_catalog_is_logged_once_and_replaced_only_when_it_changes(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    host = await host_with([{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "4"}])
    try:
        agent = (await host.create(cwd)).agent
        await host.run(agent, "hi")
        assert messages_of(await host.run(agent, "again"), "skill-catalog") == []
        skill_file(tmp_path / "proj" / ".dsh" / "skills" / "new-one.md", "new-one", "A   new\n  skill.")
        (update,) = messages_of(await host.run(agent, "third"), "skill-catalog")
        assert update["content"][0]["text"] == (
            "<system-reminder>\nThe available skill catalog changed. This complete catalog replaces every earlier "
            "available-skills list in this session:\n\n<available_skills>\n- `new-one`: A new skill.\n"
            "- `other`: Other thing.\n- `pdf-tool`: Work with PDF files.\n</available_skills>\n\nUse only names in "
            "this replacement catalog. If the user names a listed skill, or the task clearly matches its "
            "description, call the `skill` tool with the exact name before acting.\nA user may also invoke a skill "
            "directly; its <skill_content> block then appears in this conversation. Follow it, and do not call the "
            "`skill` tool again for that skill.\n</system-reminder>"
        )
        assert update["source"]["update"] is True
        for path in (tmp_path / "proj").rglob("*.md"):
            path.unlink()
        (empty,) = messages_of(await host.run(agent, "fourth"), "skill-catalog")
        assert (
            "<available_skills>\n</available_skills>\n\nNo skills are currently available"
            in empty["content"][0]["text"]
        )
        assert empty["source"]["entries"] == []
    finally:
        await host.close()


async def test_no_skills_no_catalog_and_a_resumed_session_does_not_repeat_it(tmp_path: Path) -> None:
    host = await host_with([{"text": "1"}])
    try:
        events = await host.run((await host.create(tmp_path)).agent, "hi")
        assert messages_of(events, "skill-catalog") == []
    finally:
        await host.close()
    cwd = project(tmp_path)
    host = await host_with([{"text": "1"}])
    try:
        handle = await host.create(cwd)
        assert len(messages_of(await host.run(handle.agent, "hi"), "skill-catalog")) == 1
        session_id = handle.agent.session.id
        await handle.dispose()
    finally:
        await host.close()
    again = await host_with([{"text": "2"}])
    try:
        handle = await again.agents.resume(session_id)
        assert messages_of(await again.run(handle.agent, "again"), "skill-catalog") == []
        await handle.dispose()
    finally:
        await again.close()


async def test_invocation_flags_and_user_invocation(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    hidden = tmp_path / "proj" / ".dsh" / "skills" / "hidden.md"
    skill_file(hidden, "hidden", "User only.", "Hidden body.", **{"disable-model-invocation": "true"})
    skill_file(tmp_path / "proj" / ".dsh" / "skills" / "auto.md", "auto", "Model only.", **{"user-invocable": "no"})
    host = await host_with([{"tool_calls": [call("hidden")]}, {"text": "done"}])
    try:
        agent = (await host.create(cwd)).agent
        events = await host.run(agent, "please /hidden and /auto and /missing, not a/path")
        (catalog,) = messages_of(events, "skill-catalog")
        assert [e["name"] for e in catalog["source"]["entries"]] == ["auto", "other", "pdf-tool"]
        (invoked,) = messages_of(events, "skill-invocation")
        assert invoked["source"] == {"kind": "skill-invocation", "name": "hidden", "form": "instructions"}
        base = tmp_path / "proj" / ".dsh" / "skills"
        assert invoked["content"][0]["text"] == RESULT.format(name="hidden", base=base, body="Hidden body.")
        assert results(events) == [('Error: skill "hidden" is not available for model invocation', True)]
    finally:
        await host.close()


def test_discovery_order_precedence_and_bad_files(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENTS_HOME", str(tmp_path / "agents"))
    cwd = project(tmp_path)
    root = tmp_path / "proj"
    skill_file(root / ".agents" / "skills" / "pdf-tool.md", "pdf-tool", "Shadowed by .dsh/skills.")
    custom = tmp_path / "custom"
    skill_file(custom / "other" / "SKILL.md", "other", "Shadowed by the project.")
    skill_file(custom / "custom-one.md", "custom-one", "From a configured directory.")
    skill_file(isolated_home / "skills" / "home-one.md", "home-one", "From the home.")
    skill_file(isolated_home / "skills" / ".system" / "SKILL.md", "system-one", "Never listed.")
    skill_file(tmp_path / "agents" / "skills" / "home-one.md", "home-one", "Shadowed by the home.")
    skill_file(tmp_path / "agents" / "skills" / "shared.md", "shared", "From the shared agents home.")
    (custom / "no-front.md").write_text("just text\n")
    skill_file(custom / "bad.md", "Bad Name", "x")
    skill_file(custom / "legacy.md", "legacy", "x", userInvocable="true")
    (custom / "notes.txt").write_text("ignored\n")
    with caplog.at_level(logging.WARNING, logger="test.skills"):
        found = files(Config(customSkillDirs=[str(custom)])).discover(str(cwd))
    assert {name: s.description for name, s in found.items()} == {
        "pdf-tool": "Work with PDF files.",
        "other": "Other thing.",
        "custom-one": "From a configured directory.",
        "home-one": "From the home.",
        "shared": "From the shared agents home.",
    }
    warnings = [r.getMessage() for r in caplog.records]
    assert f"skill file {custom / 'no-front.md'} ignored: missing YAML frontmatter" in warnings
    assert f'skill file {custom / "bad.md"} ignored: invalid skill name "Bad Name"' in warnings
    assert any("legacy.md ignored: invalid invocation frontmatter" in w and '"userInvocable"' in w for w in warnings)
    assert sum("higher-priority skill already exists" in w for w in warnings) == 3
    only_custom = files(Config(customSkillDirs=[str(custom)], includeDefaultRoots=False)).discover(str(cwd))
    assert set(only_custom) == {"other", "custom-one"}


async def test_long_descriptions_are_cut_in_the_catalog(tmp_path: Path) -> None:
    skill_file(tmp_path / ".dsh" / "skills" / "long.md", "long", "word " * 20)
    host = await host_with([{"text": "1"}], catalogDescriptionMaxLength=12)
    try:
        (catalog,) = messages_of(await host.run((await host.create(tmp_path)).agent, "hi"), "skill-catalog")
        assert catalog["source"]["entries"] == [{"name": "long", "description": "word word..."}]
    finally:
        await host.close()
