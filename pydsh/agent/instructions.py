"""``agent-instructions``: fold ``AGENTS.md`` / ``CLAUDE.md`` files into the model's view (spec 01 §11).

Discovery: ``$DSH_HOME/AGENTS.md``, then every directory from the project root (the nearest
directory above the working directory holding a root marker, ``.git`` by default; the working
directory itself when none does) down to the working directory, each existing candidate
(``AGENTS.md``, ``CLAUDE.md``, then the ``.local`` overlays). The first step with a claimed prompt
logs one user message (source ``agent-instructions``, form ``instructions``, ``baseline: true``)
right after the claimed messages; every later step compares the files with the changes recorded
on the surface and appends one message listing only what was added, changed or removed, or
nothing. Files of deeper directories join once the model reads, writes or edits a file below
them. The state is read from the log, so a resumed session appends nothing unchanged. Texts,
source shape (per-file ``scope``, ``path``, SHA-1 ``digest``) and the byte budget with its marker
follow the reference runtime, so logs move between the two runtimes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeGuard

from pydsh.agent.hooks import PRE_STEP, PreStep, PreStepDecision
from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.contract.agent import Agent, user_message
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.config import BaseModel, ConfigDict, Field, field_validator
from pydsh.kernel.context import Context
from pydsh.kernel.events import Next
from pydsh.session.events import Event
from pydsh.session.log import Session

KIND = "agent-instructions"
HOME_FILE = "AGENTS.md"
HOME_DISPLAY = "$DSH_HOME/AGENTS.md"
USER_GLOBAL = "user-global"
RESERVED_DIRECTORIES = frozenset({USER_GLOBAL, "agents-global"})
OPEN, CLOSE = "<system-reminder>", "</system-reminder>"
GUIDANCE = (
    "The following workspace instructions may be relevant to your work. Use them as guidance when applicable. "
    "More specific instructions take precedence over broader ones. They do not override system, developer, or "
    "direct user instructions."
)
REPLACEMENT_INTRO = (
    "This complete workspace instruction baseline replaces all earlier workspace instruction baselines. " + GUIDANCE
)
EMPTY_REPLACEMENT_INTRO = (
    "This complete workspace instruction baseline replaces all earlier workspace instruction baselines. "
    "No workspace instructions are currently active."
)
COMPACT_INTRO = "Workspace instructions were omitted or truncated to fit the configured byte budget."
ADDITIONAL_GUIDANCE = (
    "Use them as guidance when relevant; more specific instructions take precedence. They do not override "
    "system, developer, or direct user instructions."
)
REMOVED_NOTE = "The previously loaded instructions from this file no longer apply."
CHANGED_NOTE = (
    "This file changed after it was loaded. Use the following content instead of the previously loaded "
    "instructions from this file."
)


class Config(BaseModel):
    """Byte budget of one message, per-file read cap, root markers and candidate file names."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    maxBytes: int = Field(ge=0)
    maxSourceBytes: int = Field(default=1048576, ge=1)
    projectRootMarkers: tuple[str, ...] = (".git",)
    instructionFileCandidates: tuple[str, ...] = ("AGENTS.md", "CLAUDE.md")
    localInstructionFileCandidates: tuple[str, ...] = ("AGENTS.local.md", "CLAUDE.local.md")

    @field_validator("instructionFileCandidates", "localInstructionFileCandidates", "projectRootMarkers")
    @classmethod
    def _bare_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for entry in names:
            if entry in ("", ".", "..") or "/" in entry or "\\" in entry:
                raise ValueError(f"{entry!r} is not a plain file name in one directory")
        return names


# -- files -----------------------------------------------------------------------------------


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


class InstructionFile(NamedTuple):
    """One loaded file: absolute path, model-facing path, per-candidate scope key and text."""

    path: str
    display: str
    scope: str
    content: str

    @property
    def digest(self) -> str:
        return sha1(self.content)

    @property
    def group(self) -> str:
        """The directory part of the scope: files of one directory dedupe against each other."""
        return self.scope.split("\0", 1)[0]


def scope_key(display: str) -> str:
    """``<directory>\\0<file name>``: ``user-global`` for the home file, else the project-relative directory."""
    if display == HOME_DISPLAY:
        return f"{USER_GLOBAL}\0{HOME_FILE}"
    directory, file_name = os.path.split(display)
    return f"{directory or '.'}\0{file_name}"


def project_display(root: str, path: str) -> str:
    """``path`` relative to the project root; a first component that names a global scope gets ``./``."""
    relative = os.path.relpath(path, root)
    return f"./{relative}" if relative.split(os.sep, 1)[0] in RESERVED_DIRECTORIES else relative


def find_project_root(cwd: str, markers: Iterable[str]) -> str:
    """The nearest directory at or above ``cwd`` holding one of ``markers``; ``cwd`` when none does."""
    markers = tuple(markers)
    current = cwd
    while True:
        if any(os.path.lexists(os.path.join(current, m)) for m in markers):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return cwd
        current = parent


def chain(root: str, cwd: str) -> list[str]:
    """Directories from ``root`` down to ``cwd``, both included."""
    out = [cwd]
    while out[-1] != root:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            break
        out.append(parent)
    return out[::-1]


class FileReader:
    """Reads candidate files under the source cap, reusing text while a file's stat is unchanged."""

    def __init__(self, max_source_bytes: int) -> None:
        self.max_source_bytes = max_source_bytes
        self._cache: dict[str, tuple[tuple[int, int, int], str | None]] = {}

    def read(self, path: str) -> str | None:
        """The file's text; ``None`` when it is missing, not a regular file, unreadable or too large."""
        try:
            info = os.stat(path)
        except OSError:
            self._cache.pop(path, None)
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
        cached = self._cache.get(path)
        if cached is None or cached[0] != stamp:
            cached = (stamp, self._load(path) if info.st_size <= self.max_source_bytes else None)
            self._cache[path] = cached
        return cached[1]

    def _load(self, path: str) -> str | None:
        try:
            with open(path, "rb") as handle:
                raw = handle.read(self.max_source_bytes + 1)
        except OSError:
            return None
        return raw.decode("utf-8", errors="replace") if len(raw) <= self.max_source_bytes else None


def discover(reader: FileReader, config: Config, home: str, root: str, cwd: str) -> list[InstructionFile]:
    """Loaded instruction files, broadest first; a file whose trimmed text repeats one of its directory is dropped."""
    found: list[InstructionFile] = []
    home_text = reader.read(os.path.join(home, HOME_FILE))
    if home_text is not None:
        found.append(InstructionFile(os.path.join(home, HOME_FILE), HOME_DISPLAY, scope_key(HOME_DISPLAY), home_text))
    found += directory_files(reader, config, root, chain(root, cwd), set())
    kept: list[InstructionFile] = []
    trimmed: set[tuple[str, str]] = set()
    for item in found:
        key = (item.group, sha1(item.content.strip()))
        if key not in trimmed:
            trimmed.add(key)
            kept.append(item)
    return kept


# -- rendering within the byte budget --------------------------------------------------------

Section = Callable[[InstructionFile], str]


def size(text: str) -> int:
    return len(text.encode())


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes without splitting a character."""
    return text.encode()[: max(0, limit)].decode("utf-8", errors="ignore")


class Rendered(NamedTuple):
    """A budgeted text and the files whose content it carries."""

    text: str
    represented: list[InstructionFile]


def marker(max_bytes: int, omitted: list[InstructionFile], truncated: list[tuple[str, int, int]]) -> str:
    """The budget marker: which files were left out and which were cut, from and to how many bytes."""
    parts = []
    if omitted:
        parts.append("omitted " + ", ".join(f.display for f in omitted))
    if truncated:
        parts.append("truncated " + ", ".join(f"{d} from {a} to {b} bytes" for d, a, b in truncated))
    return f"Workspace instruction budget {max_bytes} bytes: {'; '.join(parts)}" if parts else ""


def frame(blocks: list[str]) -> str:
    """Blocks joined by blank lines inside one ``<system-reminder>`` frame (a closing tag in a file is escaped)."""
    body = "\n\n".join(b for b in blocks if b).replace(CLOSE, "<\\/system-reminder>")
    return f"{OPEN}\n{body}\n{CLOSE}"


class Budget:
    """Render files (broadest first) in at most ``max_bytes``: drop the broadest, then cut the most specific."""

    def __init__(self, max_bytes: int, intro: str, section: Section) -> None:
        self.max_bytes = max_bytes
        self.intro = intro
        self.section = section

    def build(
        self, files: list[InstructionFile], omitted: list[InstructionFile], cuts: list[tuple[str, int, int]], intro: str
    ) -> str:
        return frame([marker(self.max_bytes, omitted, cuts), intro, *(self.section(f) for f in files)])

    def render(self, files: list[InstructionFile]) -> Rendered:
        full = self.build(files, [], [], self.intro)
        if size(full) <= self.max_bytes:
            return Rendered(full, files)
        for start in range(1, len(files)):
            text = self.build(files[start:], files[:start], [], self.intro)
            if size(text) <= self.max_bytes:
                return Rendered(text, files[start:])
        return self.truncated(files[:-1], files[-1])

    def truncated(self, omitted: list[InstructionFile], last: InstructionFile) -> Rendered:
        original = size(last.content)
        for intro in (self.intro, COMPACT_INTRO):
            kept = self.fit(last, omitted, intro)
            cuts = [(last.display, original, size(kept.content))]
            text = self.build([kept], omitted, cuts, intro)
            if size(text) <= self.max_bytes:
                return Rendered(text, [last] if size(kept.content) > 0 or original == 0 else [])
        notice = marker(self.max_bytes, omitted, [(last.display, original, 0)]).replace(CLOSE, "<\\/system-reminder>")
        with_heading = f"{notice}\n\n{self.section(last._replace(content=''))}".replace(CLOSE, "<\\/system-reminder>")
        if size(with_heading) <= self.max_bytes:
            return Rendered(with_heading, [last] if original == 0 else [])
        return Rendered(cut(notice, self.max_bytes), [])

    def fit(self, last: InstructionFile, omitted: list[InstructionFile], intro: str) -> InstructionFile:
        """The longest prefix of ``last`` whose rendering fits (binary search over bytes)."""
        original = size(last.content)
        low, high, best = 0, original, last._replace(content="")
        while low <= high:
            mid = (low + high) // 2
            candidate = last._replace(content=cut(last.content, mid))
            cuts = [(last.display, original, size(candidate.content))]
            if size(self.build([candidate], omitted, cuts, intro)) <= self.max_bytes:
                best, low = candidate, mid + 1
            else:
                high = mid - 1
        return best


def baseline_section(item: InstructionFile) -> str:
    return f"Instructions from: {item.display}\n\n{item.content}"


def additional_section(item: InstructionFile) -> str:
    directory = item.group
    applies = (
        "These user-global instructions apply to all work."
        if directory in RESERVED_DIRECTORIES
        else f"These instructions apply to work under `{directory}`."
    )
    return f"Additional instructions from: {item.display}\n\n{applies} {ADDITIONAL_GUIDANCE}\n\n{item.content}"


# -- state on the surface --------------------------------------------------------------------


class InstructionSeqs:
    """Fold unit ``agentInstructionMessages``: seqs of every ``agent-instructions`` user message."""

    key = "agentInstructionMessages"

    def init(self) -> list[int]:
        return []

    def fold(self, state: list[int], event: Event) -> list[int]:
        if event["type"] == "user/message" and (event["data"].get("source") or {}).get("kind") == KIND:
            state.append(event["seq"])
        return state


SEQS = InstructionSeqs()


FILE_TOOLS = frozenset({"read", "write", "edit"})


class TouchedPaths:
    """Fold unit ``agentInstructionTouches``: ``file_path`` of every successful ``read``/``write``/``edit``."""

    key = "agentInstructionTouches"

    def init(self) -> tuple[dict[str, str], list[str]]:
        return {}, []

    def fold(self, state: tuple[dict[str, str], list[str]], event: Event) -> tuple[dict[str, str], list[str]]:
        pending, paths = state
        data = event["data"]
        if event["type"] == "tool/call" and data.get("name") in FILE_TOOLS:
            try:
                path = json.loads(data.get("arguments") or "{}").get("file_path")
            except (ValueError, AttributeError):
                path = None
            if isinstance(path, str) and path.strip():
                pending[data["callId"]] = path.strip()
        elif event["type"] == "tool/result":
            path = pending.pop(str(data.get("message", {}).get("toolCallId")), None)
            if path is not None and not data["message"].get("isError") and path not in paths:
                paths.append(path)
        return state


TOUCHES = TouchedPaths()


def nested_files(reader: FileReader, config: Config, root: str, cwd: str, touched: list[str]) -> list[InstructionFile]:
    """Instruction files of directories below ``cwd`` on the way to files the model read or changed."""
    found: list[InstructionFile] = []
    seen: set[str] = set()
    for path in touched:
        directory = os.path.dirname(os.path.normpath(os.path.join(cwd, path)))
        if directory == cwd or os.path.commonpath([directory, cwd]) != cwd:
            continue
        found += directory_files(reader, config, root, chain(cwd, directory)[1:], seen)
    return found


def directory_files(
    reader: FileReader, config: Config, root: str, directories: list[str], seen: set[str]
) -> list[InstructionFile]:
    """The candidate files present in ``directories``, in order; paths in ``seen`` are skipped, then added."""
    names = [*config.instructionFileCandidates, *config.localInstructionFileCandidates]
    found: list[InstructionFile] = []
    for directory in directories:
        for file_name in names:
            path = os.path.join(directory, file_name)
            text = None if path in seen else reader.read(path)
            seen.add(path)
            if text is not None:
                display = project_display(root, path)
                found.append(InstructionFile(path, display, scope_key(display), text))
    return found


def visible_state(session: Session) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """The newest baseline source still on the surface and the latest change per scope on the surface."""
    seqs = session.fold(SEQS)
    if not seqs:
        return None, {}
    on_surface = set(session.surface.nodes)
    baseline: dict[str, Any] | None = None
    changes: dict[str, dict[str, Any]] = {}
    for seq in seqs:
        if seq not in on_surface:
            continue
        source = session.events[seq]["data"]["source"]
        if source.get("baseline") is True:
            baseline = source
        for change in source.get("changes") or ():
            if (
                isinstance(change, dict)
                and isinstance(change.get("scope"), str)
                and isinstance(change.get("path"), str)
            ):
                changes[change["scope"]] = change
    return baseline, changes


def readable(change: object) -> TypeGuard[dict[str, Any]]:
    """Whether a logged change record has the fields reconciliation reads (foreign logs may differ)."""
    return isinstance(change, dict) and isinstance(change.get("scope"), str) and isinstance(change.get("path"), str)


def live(change: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """Whether a recorded change leaves the file's instructions in force."""
    return change is not None and change.get("action") != "remove"


# -- composing the step's message ------------------------------------------------------------


class Change(NamedTuple):
    """One transition to render: its logged record and the file (empty for a removal)."""

    record: dict[str, Any]
    file: InstructionFile


def set_record(item: InstructionFile) -> dict[str, Any]:
    return {"action": "set", "scope": item.scope, "path": item.display, "digest": item.digest}


def change_section(by_path: dict[str, Change]) -> Section:
    def section(item: InstructionFile) -> str:
        record = by_path[item.path].record
        if record["action"] == "set":
            return additional_section(item)
        if record["action"] == "remove":
            return f"Instructions removed: {record['path']}\n\n{REMOVED_NOTE}"
        return f"Updated instructions from: {record['path']}\n\n{CHANGED_NOTE}\n\n{item.content}"

    return section


class Instructions:
    """Builds each step's instruction message from the files and the surface."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config
        self.reader = FileReader(config.maxSourceBytes)
        self._identities: dict[tuple[str, str], str] = {}

    def identity(self, cwd: str, root: str) -> str:
        """What a baseline depends on besides file contents; a change re-baselines (JSON as the reference writes it).
        Built once per working directory and root: every step of every session asks."""
        known = self._identities.get((cwd, root))
        if known is None:
            known = self._identities[cwd, root] = self._identity(cwd, root)
        return known

    def _identity(self, cwd: str, root: str) -> str:
        relative = os.path.relpath(root, cwd)
        fields = {
            "projectRoot": "" if relative == "." else relative,
            "projectRootMarkers": self.config.projectRootMarkers,
            "maxBytes": self.config.maxBytes,
            "maxSourceBytes": self.config.maxSourceBytes,
            "instructionFileCandidates": self.config.instructionFileCandidates,
            "localInstructionFileCandidates": self.config.localInstructionFileCandidates,
        }
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)

    def compose(self, agent: Agent) -> dict[str, Any] | None:
        """The message this step adds, or ``None`` when the surface already says what the files say."""
        if self.config.maxBytes == 0:
            return None
        cwd = self.ctx.require(WORKING_DIRECTORY).current(agent)
        root = find_project_root(cwd, self.config.projectRootMarkers)
        files = discover(self.reader, self.config, str(dsh_home()), root, cwd)
        identity = self.identity(cwd, root)
        baseline, visible = visible_state(agent.session)
        if baseline is None or baseline.get("baselineIdentity") != identity:
            return self.baseline(files, identity, visible if baseline is not None else None)
        fitting = self.baseline_render(files, replacing=False).represented
        own = {f.scope for f in files}
        nested = nested_files(self.reader, self.config, root, cwd, agent.session.fold(TOUCHES)[1])
        return self.update([*files, *(f for f in nested if f.scope not in own)], visible, fitting, own)

    def baseline_render(self, files: list[InstructionFile], *, replacing: bool) -> Rendered:
        intro = (EMPTY_REPLACEMENT_INTRO if not files else REPLACEMENT_INTRO) if replacing else GUIDANCE
        return Budget(self.config.maxBytes, intro, baseline_section).render(files)

    def baseline(
        self, files: list[InstructionFile], identity: str, replaced: dict[str, dict[str, Any]] | None
    ) -> dict[str, Any] | None:
        """A baseline of every file (replacing a visible one made for another root, cwd or config)."""
        if not files and replaced is None:
            return None
        rendered = self.baseline_render(files, replacing=replaced is not None)
        included = {f.scope for f in rendered.represented}
        removals = [
            {"action": "remove", "scope": scope, "path": change["path"]}
            for scope, change in (replaced or {}).items()
            if live(change) and scope not in included
        ]
        sets = [
            {"action": "set", "scope": f.scope, "path": f.display, "digest": f.digest} for f in rendered.represented
        ]
        source = {
            "kind": KIND,
            "form": "instructions",
            "baseline": True,
            "baselineIdentity": identity,
            "changes": [*removals, *sets],
        }
        return user_message(rendered.text, source)

    def update(
        self,
        files: list[InstructionFile],
        visible: dict[str, dict[str, Any]],
        fitting: list[InstructionFile],
        chained: set[str],
    ) -> dict[str, Any] | None:
        """One message for the files added, changed or removed since the surface recorded them.

        A file of the root-to-cwd chain that a fresh baseline would leave out (``fitting``) is not
        offered as an addition; files of deeper directories (``chained`` excludes them) always are.
        """
        fits = {f.scope for f in fitting} | ({f.scope for f in files} - chained)
        current = {f.scope: f for f in files}
        items: list[Change] = []
        for scope in [*current, *(s for s in visible if s not in current)]:
            before, item = visible.get(scope), current.get(scope)
            if item is None:
                if live(before):
                    record = {"action": "remove", "scope": scope, "path": before["path"]}
                    items.append(Change(record, InstructionFile(f"removed:{scope}", before["path"], scope, "")))
                continue
            if not live(before):
                if scope in fits:
                    items.append(Change(set_record(item), item))
                continue
            if (before["path"], before.get("digest")) != (item.display, item.digest):
                items.append(Change({**set_record(item), "action": "replace"}, item))
        if not items:
            return None
        by_path = {c.file.path: c for c in items}
        rendered = Budget(self.config.maxBytes, "", change_section(by_path)).render([c.file for c in items])
        kept = [by_path[f.path].record for f in rendered.represented]
        if not kept:
            return None
        return user_message(rendered.text, {"kind": KIND, "form": "instructions", "changes": kept})

    async def on_pre_step(self, payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
        decision = await nxt()
        if decision.get("kind") == "reject" or payload["signal"].aborted:
            return decision
        messages = list(decision.get("messages") or [])
        if payload["step"] == 1 and not messages:
            return decision
        message = self.compose(payload["agent"])
        if message is None:
            return decision
        claimed = {m.get("id") for m in payload.get("messages") or ()}
        last = max((i for i, m in enumerate(messages) if m.get("id") in claimed), default=-1)
        return {**decision, "messages": [*messages[: last + 1], message, *messages[last + 1 :]]}


name = "agent-instructions"
inject = (WORKING_DIRECTORY,)


def apply(ctx: Context, config: Config) -> None:
    """Register the pre-step listener that folds instruction files into the model's view."""
    ctx.on(PRE_STEP, Instructions(ctx, config).on_pre_step, name="instructions")
