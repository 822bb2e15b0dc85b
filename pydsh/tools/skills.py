"""``tool-skill``: skill discovery, the session skill catalog and the ``skill`` tool (spec 05 §4.11).

Skills are Markdown files with YAML front matter (``name`` in kebab case, ``description``,
optional ``disable-model-invocation`` and ``user-invocable``), found as ``<name>/SKILL.md`` or
``<name>.md`` under, in precedence order: ``<project>/.dsh/skills``, ``<project>/.agents/skills``,
the configured ``customSkillDirs``, ``$DSH_HOME/skills`` and ``~/.agents/skills`` (``<project>`` is
the nearest directory with ``.git`` above the working directory). The first step that sees skills
logs the catalog (source ``skill-catalog``, form ``catalog``); a later step logs a replacement only
when the catalog's entries changed, so an unchanged catalog is never sent twice. A ``/name`` token
in a user's prompt logs that skill's content (source ``skill-invocation``). Texts and source shapes
are the reference runtime's, so logs move between the two runtimes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, NamedTuple

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.agent.instructions import find_project_root
from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.contract.agent import Agent, user_message
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.kernel.events import Next
from pydsh.session.events import Event

SKILL_NAME = r"[a-z0-9]+(?:-[a-z0-9]+)*"
GESTURE = r"(?:^|(?<=\s))/([a-z0-9]+(?:-[a-z0-9]+)*)(?=\s|$)"
"""Patterns compiled on first use (the ``re`` cache), not at start-up."""
DESCRIPTION = (
    "Load the full instructions for a skill. Call it before acting on a task that names or clearly matches a "
    "skill in the session skill catalog."
)
PARAMETERS = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "The exact skill name from the available skills list."}},
    "required": ["name"],
}
CATALOG_HEAD = (
    "A skill is a reusable set of task-specific instructions. The following skills are available in this session:"
)
CATALOG_TAIL = (
    "If the user names a skill, or the task clearly matches a skill's description, call the `skill` tool with the "
    "exact skill name before taking task actions. Load all applicable skills, then follow their full instructions. "
    "This catalog contains summaries only; do not infer or follow a skill's instructions until it has been loaded.\n"
    "A user may also invoke a skill directly; its <skill_content> block then appears in this conversation. Follow "
    "it, and do not call the `skill` tool again for that skill."
)
UPDATE_HEAD = (
    "The available skill catalog changed. This complete catalog replaces every earlier available-skills list in "
    "this session:"
)
UPDATE_TAIL = (
    "Use only names in this replacement catalog. If the user names a listed skill, or the task clearly matches its "
    "description, call the `skill` tool with the exact name before acting.\n"
    "A user may also invoke a skill directly; its <skill_content> block then appears in this conversation. Follow "
    "it, and do not call the `skill` tool again for that skill."
)
EMPTY_TAIL = (
    "No skills are currently available through the `skill` tool. Do not use names from earlier skill catalogs.\n"
    "A user may still invoke a skill directly; its <skill_content> block then appears in this conversation. Follow "
    "it, and do not call the `skill` tool for it."
)
RESOURCES = (
    "Resolve relative paths mentioned by this skill against the base directory before using them. Load referenced "
    "resources only as needed."
)


class Config(BaseModel):
    """Extra skill directories, whether the default roots are searched, and the catalog description cap."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    customSkillDirs: tuple[str, ...] = ()
    includeDefaultRoots: bool = True
    catalogDescriptionMaxLength: int = Field(default=500, ge=3)


class Skill(NamedTuple):
    """One discovered skill: its front matter, file, base directory and instructions."""

    name: str
    description: str
    model_invocable: bool
    user_invocable: bool
    path: str
    directory: str
    content: str


def escape_text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def render_skill(skill: Skill) -> str:
    """The ``<skill_content>`` block a load returns and a user invocation logs."""
    return "\n".join(
        [
            f'<skill_content name="{escape_attr(skill.name)}">',
            "<skill_resources>",
            f"Base directory for this skill: {escape_text(skill.directory)}",
            RESOURCES,
            "</skill_resources>",
            "",
            "<skill_instructions>",
            skill.content,
            "</skill_instructions>",
            "</skill_content>",
        ]
    )


# -- front matter ------------------------------------------------------------------------------


class SkillFileError(PydshError, ValueError):
    """A skill file that cannot be used; the message says why."""


def split_front_matter(raw: str) -> tuple[str, str]:
    """``(yaml, body)`` of a file opening with a ``---`` line and a later closing ``---`` line."""
    lines = raw.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise SkillFileError("missing YAML frontmatter")
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") == "---":
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise SkillFileError("missing YAML frontmatter")


def flag(data: dict[str, Any], key: str) -> bool | None:
    """A front matter boolean (``true``/``yes``/``on``/``1`` and their opposites); ``None`` when absent."""
    if key not in data:
        return None
    value = data[key]
    if isinstance(value, bool):
        return value
    word = str(value).lower() if isinstance(value, str | int) else ""
    if word in ("true", "yes", "on", "1"):
        return True
    if word in ("false", "no", "off", "0"):
        return False
    raise SkillFileError(f'invalid invocation frontmatter: frontmatter field "{key}" must be a boolean')


def parse_skill(raw: str, path: str, directory: str) -> Skill:
    """The skill a file declares; ``SkillFileError`` naming the problem otherwise."""
    import yaml

    head, body = split_front_matter(raw)
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        raise SkillFileError(f"invalid YAML frontmatter: {exc}") from None
    if not isinstance(data, dict):
        raise SkillFileError("missing YAML frontmatter")
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not name or not isinstance(description, str) or not description:
        raise SkillFileError("frontmatter requires name and description")
    if not re.fullmatch(SKILL_NAME, name):
        raise SkillFileError(f'invalid skill name "{name}"')
    for legacy, canonical in (
        ("disableModelInvocation", "disable-model-invocation"),
        ("modelInvocable", "disable-model-invocation"),
        ("userInvocable", "user-invocable"),
    ):
        if legacy in data:
            raise SkillFileError(f'invalid invocation frontmatter: field "{legacy}" is unsupported; use "{canonical}"')
    model = flag(data, "disable-model-invocation") is not True
    user = flag(data, "user-invocable") is not False
    return Skill(name, description, model, user, path, directory, body.strip())


# -- discovery ---------------------------------------------------------------------------------


def agents_home() -> str:
    """``$AGENTS_HOME`` (default ``~/.agents``), the shared home of agent tools."""
    return os.environ.get("AGENTS_HOME", "").strip() or os.path.expanduser("~/.agents")


class SkillFiles:
    """Skill discovery over the configured roots; parsed files are reused while their stat is unchanged."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self._parsed: dict[str, tuple[tuple[int, int, int], Skill | None]] = {}

    def roots(self, cwd: str | None) -> list[tuple[str, bool]]:
        """``(directory, skip .system)`` in precedence order."""
        out: list[tuple[str, bool]] = []
        if self.config.includeDefaultRoots and cwd is not None:
            project = find_project_root(cwd, (".git",))
            out += [
                (os.path.join(project, ".dsh", "skills"), False),
                (os.path.join(project, ".agents", "skills"), False),
            ]
        out += [(os.path.abspath(os.path.expanduser(d)), False) for d in self.config.customSkillDirs]
        if self.config.includeDefaultRoots:
            out += [(os.path.join(str(dsh_home()), "skills"), True), (os.path.join(agents_home(), "skills"), False)]
        return out

    def discover(self, cwd: str | None) -> dict[str, Skill]:
        """Every usable skill by name; the first root that has a name wins."""
        found: dict[str, Skill] = {}
        for root, skip_system in self.roots(cwd):
            for skill in self.scan(root, skip_system):
                if skill.name in found:
                    self.ctx.logger.warning(
                        'skill "%s" from %s ignored because a higher-priority skill already exists', skill.name, root
                    )
                    continue
                found[skill.name] = skill
        return found

    def scan(self, root: str, skip_system: bool) -> list[Skill]:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            return []
        skills = []
        for entry in entries:
            if skip_system and entry == ".system":
                continue
            full = os.path.join(root, entry)
            if os.path.isdir(full):
                skill = self.load(os.path.join(full, "SKILL.md"), full)
            elif entry.endswith(".md") and os.path.isfile(full):
                skill = self.load(full, root)
            else:
                continue
            if skill is not None:
                skills.append(skill)
        return skills

    def load(self, path: str, directory: str) -> Skill | None:
        """The skill in ``path``; a bad file is skipped with one warning naming it and the problem."""
        try:
            info = os.stat(path)
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._parsed.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        skill: Skill | None = None
        try:
            with open(path, encoding="utf-8") as handle:
                skill = parse_skill(handle.read(), path, directory)
        except (OSError, UnicodeDecodeError, SkillFileError) as exc:
            self.ctx.logger.warning("skill file %s ignored: %s", path, exc)
        self._parsed[path] = (stamp, skill)
        return skill


# -- the catalog -------------------------------------------------------------------------------


def catalog_description(value: str, limit: int) -> str:
    """Whitespace collapsed; longer than ``limit`` → cut with ``...``."""
    normalized = " ".join(value.split())
    return normalized if len(normalized) <= limit else normalized[: limit - 3] + "..."


def entries_digest(entries: list[dict[str, str]]) -> str:
    """Catalog identity over its entries (name, description), as the reference computes it."""
    canonical = "\n".join(
        json.dumps([e["name"], e["description"]], ensure_ascii=False, separators=(",", ":")) for e in entries
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def readable_entries(source: dict[str, Any]) -> list[dict[str, str]] | None:
    """The entries of a logged catalog source, or ``None`` when it is not a usable catalog."""
    entries = source.get("entries")
    if not isinstance(entries, list):
        return None
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        name, description = entry.get("name"), entry.get("description")
        if not isinstance(name, str) or not name or not isinstance(description, str):
            return None
        out.append({"name": name, "description": description})
    return out


class CatalogSeqs:
    """Fold unit ``skillCatalogMessages``: seqs of every ``skill-catalog`` user message."""

    key = "skillCatalogMessages"

    def init(self) -> list[int]:
        return []

    def fold(self, state: list[int], event: Event) -> list[int]:
        if event["type"] == "user/message" and (event["data"].get("source") or {}).get("kind") == "skill-catalog":
            state.append(event["seq"])
        return state


CATALOGS = CatalogSeqs()


def catalog_history(agent: Agent) -> tuple[bool, str | None]:
    """``(published, digest)``: whether a catalog was ever logged and the digest of the newest one on the surface."""
    session = agent.session
    readable = [
        (seq, entries)
        for seq in session.fold(CATALOGS)
        if (entries := readable_entries(session.events[seq]["data"]["source"])) is not None
    ]
    if not readable:
        return False, None
    on_surface = set(session.surface.nodes)
    shown = next((entries for seq, entries in reversed(readable) if seq in on_surface), None)
    return True, None if shown is None else entries_digest(shown)


def catalog_message(entries: list[dict[str, str]], *, update: bool) -> dict[str, Any]:
    """The first catalog, or a replacement of an earlier one (exact texts of the reference)."""
    lines = [f"- `{e['name']}`: {escape_text(e['description'])}" for e in entries]
    head = UPDATE_HEAD if update else CATALOG_HEAD
    tail = (UPDATE_TAIL if entries else EMPTY_TAIL) if update else CATALOG_TAIL
    text = "\n".join(["<system-reminder>", head, "", "<available_skills>", *lines, "</available_skills>", "", tail])
    source: dict[str, Any] = {"kind": "skill-catalog", "form": "catalog"}
    if update:
        source["update"] = True
    source["entries"] = entries
    return user_message(text + "\n</system-reminder>", source)


def invoked_names(messages: list[dict[str, Any]]) -> list[str]:
    """``/name`` tokens of the users' prompts, first seen first."""
    names: list[str] = []
    for message in messages:
        if (message.get("source") or {}).get("kind") != "user":
            continue
        for block in message.get("content") or ():
            if block.get("type") == "text":
                names += [n for n in re.findall(GESTURE, block.get("text", "")) if n not in names]
    return names


class SkillTool:
    """The ``skill`` tool body, the catalog and the user invocation listeners."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.files = SkillFiles(ctx, config)
        self.definition = ToolDefinition(
            "skill", DESCRIPTION, PARAMETERS, self.execute, is_concurrency_safe=lambda _args: True
        )

    def cwd(self, agent: Agent | None) -> str | None:
        return None if agent is None else str(self.ctx.require(WORKING_DIRECTORY).current(agent))

    def execute(self, args: dict[str, Any], exec: ToolExec) -> str:
        name = args.get("name")
        if not isinstance(name, str) or not re.fullmatch(SKILL_NAME, name):
            raise ToolError(f'invalid skill name "{name}"')
        skill = self.files.discover(self.cwd(exec.agent)).get(name)
        if skill is None:
            raise ToolError(f'skill "{name}" is unknown or no longer available')
        if not skill.model_invocable:
            raise ToolError(f'skill "{name}" is not available for model invocation')
        return render_skill(skill)

    def catalog(self, agent: Agent, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The catalog message this step logs, or ``None`` when the surface already shows this catalog."""
        tools = self.ctx.require(TOOLS)
        visible = tools.lookup(agent, "skill") is self.definition
        skills = self.files.discover(self.cwd(agent)).values() if visible else ()
        limit = self.config.catalogDescriptionMaxLength
        entries = [
            {"name": s.name, "description": catalog_description(s.description, limit)}
            for s in sorted(skills, key=lambda s: s.name)
            if s.model_invocable
        ]
        published, shown = catalog_history(agent)
        if shown == entries_digest(entries) or (not published and not entries):
            return None
        if any((m.get("source") or {}).get("kind") == "skill-catalog" for m in messages):
            return None
        return catalog_message(entries, update=published)

    async def on_catalog(self, payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        decision = await nxt()
        messages = list(decision.get("messages") or [])
        if decision.get("kind") == "reject" or payload["signal"].aborted or (payload["step"] == 1 and not messages):
            return decision
        message = self.catalog(payload["agent"], messages)
        return decision if message is None else {**decision, "messages": [*messages, message]}

    async def on_invocation(self, payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        decision = await nxt()
        names = invoked_names(payload.get("messages") or [])
        if decision.get("kind") == "reject" or not names:
            return decision
        skills = self.files.discover(self.cwd(payload["agent"]))
        injected = [
            user_message(render_skill(skill), {"kind": "skill-invocation", "name": skill.name, "form": "instructions"})
            for skill in (skills.get(n) for n in names)
            if skill is not None and skill.user_invocable
        ]
        if not injected:
            return decision
        return {**decision, "messages": [*(decision.get("messages") or []), *injected]}


name = "tool-skill"
inject = (TOOLS, WORKING_DIRECTORY)


def apply(ctx: Context, config: Config) -> None:
    """Register ``skill`` and the listeners that log the catalog and user-invoked skills."""
    tool = SkillTool(ctx, config)
    ctx.require(TOOLS).register(ctx, tool.definition)
    ctx.on(PRE_STEP, tool.on_invocation, name="skills-invocation")
    ctx.on(PRE_STEP, tool.on_catalog, name="skills-catalog")
