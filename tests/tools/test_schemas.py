"""Acceptance 1: the composed tool list is sorted and every schema has the interface structure byte for byte.

Structure (names, types, enums, key order, required lists) is interface and must equal spec 05 §4.
Descriptions are pydsh's own wording; ``schemas.golden.jsonl`` pins their bytes so a change to the
provider-cached prefix is always deliberate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.kernel.compose import SHIPPED, interpolate, read_yaml_file
from tests.tools.harness import harness

MINE = {
    "tools",
    "tool-bash",
    "tool-fs",
    "tool-fs-search",
    "tool-jobs",
    "tool-todo",
    "tool-working-directory",
    "tool-web",
    "spill-policy",
    "repeat-tool-reminder",
    "fs-observation-policy",
    "sandbox-policy",
    "approval",
    "permission",
    "jobs",
}
SANDBOX = '"sandbox_permissions":{"type":"string","description":"","enum":["workspace-write","danger-full-access"]},'
JUSTIFY = '"justification":{"type":"string","description":""}'
SKELETONS = {
    "bash": '{"name":"bash","description":"","parameters":{"type":"object","properties":{"description":{"type":'
    '"string","description":""},"command":{"type":"string","description":""},"timeoutMs":{"type":"number",'
    '"description":""},"workdir":{"type":"string","description":""},"run_in_background":{"type":"boolean",'
    f'"description":""}},{SANDBOX}{JUSTIFY}}},"required":["description","command"]}}}}',
    "edit": '{"name":"edit","description":"","parameters":{"type":"object","properties":{"file_path":{"type":'
    '"string","description":""},"old_string":{"type":"string","description":""},"new_string":{"type":"string",'
    f'"description":""}},"replace_all":{{"type":"boolean","description":""}},{SANDBOX}{JUSTIFY}}},"required":'
    '["file_path","old_string","new_string"]}}',
    "glob": '{"name":"glob","description":"","parameters":{"type":"object","properties":{"pattern":{"type":'
    '"string","description":""},"path":{"type":"string","description":""}},"required":["pattern"]}}',
    "grep": '{"name":"grep","description":"","parameters":{"type":"object","properties":{"pattern":{"type":'
    '"string","description":""},"path":{"type":"string","description":""},"include":{"type":"string",'
    '"description":""}},"required":["pattern"]}}',
    "job_kill": '{"name":"job_kill","description":"","parameters":{"type":"object","properties":{"job_id":{"type":'
    '"string","description":""},"reason":{"type":"string","description":""}},"required":["job_id"]}}',
    "job_list": '{"name":"job_list","description":"","parameters":{"type":"object","properties":{}}}',
    "job_output": '{"name":"job_output","description":"","parameters":{"type":"object","properties":{"job_id":'
    '{"type":"string","description":""},"wait":{"type":"boolean","description":""},"timeout_ms":{"type":"number",'
    '"description":""}},"required":["job_id"]}}',
    "read": '{"name":"read","description":"","parameters":{"type":"object","properties":{"file_path":{"type":'
    '"string","description":""},"offset":{"type":"number","description":""},"limit":{"type":"number",'
    '"description":""}},"required":["file_path"]}}',
    "todo_write": '{"name":"todo_write","description":"","parameters":{"type":"object","properties":{"todos":'
    '{"type":"array","description":"","items":{"type":"object","additionalProperties":false,"properties":'
    '{"content":{"type":"string","description":""},"status":{"type":"string","description":"","enum":["pending",'
    '"in_progress","completed"]}},"required":["content","status"]}}},"required":["todos"]}}',
    "web_fetch": '{"name":"web_fetch","description":"","parameters":{"type":"object","properties":{"url":{"type":'
    '"string","description":""}},"required":["url"]}}',
    "working_directory": '{"name":"working_directory","description":"","parameters":{"type":"object","properties":'
    '{"cd":{"type":"string","description":""}}}}',
    "write": '{"name":"write","description":"","parameters":{"type":"object","properties":{"file_path":{"type":'
    f'"string","description":""}},"content":{{"type":"string","description":""}},{SANDBOX}{JUSTIFY}}},"required":'
    '["file_path","content"]}}',
}
MINIMAL = {
    "bash": '{"name":"bash","description":"","parameters":{"type":"object","properties":{"command":{"type":'
    '"string","description":""}},"required":["command"]}}',
    "str_replace_editor": '{"name":"str_replace_editor","description":"","parameters":{"type":"object",'
    '"properties":{"command":{"type":"string","description":"","enum":["view","create","str_replace","insert"]},'
    '"path":{"type":"string","description":""},"file_text":{"oneOf":[{"type":"string"},{"type":"null"}],'
    '"description":""},"insert_line":{"oneOf":[{"type":"integer"},{"type":"null"}],"description":""},"new_str":'
    '{"oneOf":[{"type":"string"},{"type":"null"}],"description":""},"old_str":{"oneOf":[{"type":"string"},'
    '{"type":"null"}],"description":""},"view_range":{"oneOf":[{"type":"array","items":{"type":"integer"}},'
    '{"type":"null"}],"description":""}},"required":["command","path"]}}',
}


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def skeleton(value: Any) -> Any:
    """``value`` with every description emptied (structure only)."""
    if isinstance(value, dict):
        return {k: "" if k == "description" and isinstance(v, str) else skeleton(v) for k, v in value.items()}
    if isinstance(value, list):
        return [skeleton(v) for v in value]
    return value


def shipped_rows() -> list[tuple[str, Any]]:
    """The rows of this package in the shipped ``base`` and ``agent-tools`` bundles, with their configs."""
    rows = []
    for bundle in ("base.yml", "agent-tools.yml"):
        for op in read_yaml_file(SHIPPED / bundle):
            rows += [(r["name"], interpolate(r.get("config"), bundle)) for r in op["insert"] if r["name"] in MINE]
    return rows


async def test_composed_sdk_tool_list_is_sorted_and_exact(tmp_path: Path) -> None:
    world = await harness(tmp_path, shipped_rows(), startup=True)
    try:
        schemas = world.tools.schemas(world.agent)
        names = [s["name"] for s in schemas]
        assert names == sorted(SKELETONS)
        assert names == sorted(names)
        for schema in schemas:
            assert compact(skeleton(schema)) == SKELETONS[schema["name"]], schema["name"]
        golden = (Path(__file__).parent / "schemas.golden.jsonl").read_text().splitlines()
        assert [compact(s) for s in schemas] == golden
        assembly = await world.kernel.ctx.require(SYSTEM_PROMPT).assemble(agent=world.agent)
        assert [t["name"] for t in assembly.tools] == names
    finally:
        await world.close()


async def test_minimal_preset_tools_are_exact(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("persistent-bash", None), ("tool-str-replace-editor", None)])
    try:
        for schema in world.tools.schemas(None):
            assert compact(skeleton(schema)) == MINIMAL[schema["name"]], schema["name"]
    finally:
        await world.close()


async def test_guidance_sections_are_registered_at_their_orders(tmp_path: Path) -> None:
    world = await harness(tmp_path, shipped_rows(), startup=True)
    try:
        assembly = await world.kernel.ctx.require(SYSTEM_PROMPT).assemble(agent=world.agent)
        tool_sections = [(s.name, s.order) for s in assembly.sections if s.name.startswith("tool:")]
        assert tool_sections == [
            ("tool:bash", 1000),
            ("tool:read", 1100),
            ("tool:write", 1200),
            ("tool:edit", 1300),
            ("tool:glob", 1400),
            ("tool:grep", 1500),
            ("tool:jobs", 1600),
            ("tool:web_fetch", 2100),
        ]
    finally:
        await world.close()
