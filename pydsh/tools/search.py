"""The ``glob`` and ``grep`` tools (spec 05 §4.6–4.7).

Both use ripgrep when it is on ``PATH`` and a pure-Python walker with the same filters otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydsh.agent.cwd import quote
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.tools.files import FsError, current_dir, resolve
from pydsh.tools.globs import Rule, compile_glob, ignored, parse_ignore
from pydsh.tools.protected import Protection, child_environ, protection
from pydsh.tools.spill import save

GLOB_LIMIT = 100
GREP_LIMIT = 250
MAX_LINE_BYTES = 2000
TIMEOUT_MS = 30000
VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")
SPILL_HINT = "Use read with offset/limit, or grep this path to search within it."

GLOB = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": (
                'Glob to match file paths against, e.g. "**/*.py" or "tests/**/test_*.py". A pattern without '
                'a "/" matches file names at any depth, so "*" and "*.py" search the whole tree; include a "/" '
                "to anchor the pattern to a depth."
            ),
        },
        "path": {
            "type": "string",
            "description": "Directory to search. Defaults to the current working directory; a relative path "
            "resolves against it.",
        },
    },
    "required": ["pattern"],
}
GREP = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Regular expression in ripgrep syntax."},
        "path": {
            "type": "string",
            "description": "File or directory to search. Defaults to the current working directory; a relative "
            "path resolves against it.",
        },
        "include": {
            "type": "string",
            "description": 'A single glob limiting which files are searched (e.g. "*.py", "*.{ts,tsx}"). One '
            "pattern only, not a list; negation is not supported.",
        },
    },
    "required": ["pattern"],
}


class SearchError(ToolError):
    """A grep failure with a ``SEARCH_*`` code."""

    error_name = "SearchError"


def display(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when inside it, else absolute."""
    prefix = cwd if cwd.endswith("/") else cwd + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def search_root(ctx: Context, exec: ToolExec, args: dict[str, Any]) -> tuple[str, Protection]:
    """The directory or file to search and the read refusals that apply to it and below it."""
    raw = args.get("path")
    root = current_dir(ctx, exec) if raw is None else resolve(ctx, exec, raw) if raw else None
    if root is None:
        raise ToolError("path must be a non-empty string when given")
    if not os.path.exists(root):
        raise FsError(f"cannot read {quote(root)}: not found", "FS_NOT_FOUND")
    guard = protection(ctx, exec)
    guard.check(os.path.realpath(root), root, "read")
    return root, guard


async def run_rg(argv: list[str], cwd: str) -> tuple[int, bytes, str]:
    """Run ripgrep to completion (killed if the call is aborted) with the tools' scrubbed environment."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=child_environ(),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    return proc.returncode or 0, out, err.decode("utf-8", "replace").strip()


async def in_thread(work: Callable[[threading.Event], Any]) -> Any:
    """Run a blocking walk in a thread; an abort stops waiting and tells the walk to stop."""
    stop = threading.Event()
    try:
        return await asyncio.to_thread(work, stop)
    finally:
        stop.set()


# -- glob ----------------------------------------------------------------------------------------


def walk_files(root: str, stop: threading.Event) -> Iterator[tuple[str, os.stat_result]]:
    """Every regular file below ``root`` (hidden and ignored included, VCS directories and symlinks skipped)."""
    stack = [root]
    while stack:
        if stop.is_set():
            return
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if entry.name not in VCS_DIRS:
                    stack.append(entry.path)
            elif stat.S_ISREG(st.st_mode):
                yield entry.path, st


def python_glob(root: str, pattern: str, stop: threading.Event) -> list[tuple[int, str]]:
    regex = compile_glob(pattern)
    if regex is None:
        return []
    prefix = root.rstrip("/") + "/"
    return [(st.st_mtime_ns, path) for path, st in walk_files(root, stop) if regex.match(path[len(prefix) :])]


async def rg_glob(rg: str, root: str, pattern: str) -> list[tuple[int, str]]:
    argv = [rg, "--files", f"--glob={pattern}", *(f"--glob=!{d}" for d in VCS_DIRS), "--no-ignore", "--hidden"]
    code, out, err = await run_rg([*argv, "--", root], root)
    if code == 2 and not out:
        raise SearchError(f"glob search failed (exit 2): {err}", "SEARCH_FAILED")
    return await asyncio.to_thread(mtimes, out.decode("utf-8", "surrogateescape").splitlines())


def mtimes(paths: list[str]) -> list[tuple[int, str]]:
    """``(mtime, path)`` of each path that still exists; blocking, so run off the event loop."""
    found = []
    for path in paths:
        try:
            found.append((os.stat(path, follow_symlinks=False).st_mtime_ns, path))
        except OSError:
            continue
    return found


class Config(BaseModel):
    """Result caps and the over-cap ``glob`` page (DeepSeek Harness's keys and defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sampleOverCapGlobResults: bool = False
    globMaxResults: int = Field(default=GLOB_LIMIT, ge=1)
    grepMaxMatches: int = Field(default=GREP_LIMIT, ge=1)


class SearchTools:
    """Bodies of ``glob`` and ``grep``, bound to the plugin's context."""

    def __init__(self, ctx: Context, config: Config) -> None:
        self.ctx = ctx
        self.config = config

    async def glob(self, args: dict[str, Any], exec: ToolExec) -> str:
        pattern: str = args["pattern"]
        if not pattern:
            raise ToolError("pattern must be a non-empty string")
        root, _guard = search_root(self.ctx, exec, args)
        if not os.path.isdir(root):
            raise ToolError(f"path is not a directory: {quote(root)}")
        rg = shutil.which("rg")
        if rg is not None:
            found = await rg_glob(rg, root, pattern)
        else:
            found = await in_thread(lambda stop: python_glob(root, pattern, stop))
        if not found:
            return "No files found"
        cwd = current_dir(self.ctx, exec)
        ordered = [path for _mtime, path in sorted(found)]
        paths = [display(path, cwd) for path in ordered]
        cap = self.config.globMaxResults
        if len(paths) <= cap:
            return "\n".join(paths)
        page, basis = paths[:cap], "."
        if self.config.sampleOverCapGlobResults:
            page, taken, groups = sample_top_level([display(p, root) for p in ordered], paths, cap)
            if groups < len(paths):
                basis = (
                    f", sampled across {taken} of the {groups} top-level entries this pattern matched instead of "
                    "taken in modification-time order."
                )
                basis += " Narrow path to inspect a specific subtree." if taken < groups else ""
        spilled = save(exec.session.id if exec.session else "", "glob", "\n".join(paths))
        if spilled is None:
            notice = "The complete result could not be saved; narrow pattern or path to see more."
        else:
            notice = f"Full sorted result stored at: {spilled}. {SPILL_HINT}"
        return "\n".join(page) + f"\n\n(Showing {len(page)} of {len(paths)} paths{basis} {notice})"

    async def grep(self, args: dict[str, Any], exec: ToolExec) -> str:
        pattern: str = args["pattern"]
        include: str | None = args.get("include")
        root, guard = search_root(self.ctx, exec, args)
        refused = guard.within(root)
        rg = shutil.which("rg")
        if rg is not None:
            matches = (await rg_grep(rg, root, pattern, include)).without(refused)
        else:
            try:
                regex = re.compile(pattern, re.MULTILINE)
            except re.error as exc:
                raise SearchError(f"grep pattern rejected: {exc}", "SEARCH_INVALID_PATTERN") from None
            matches = await in_thread(lambda stop: PythonGrep(root, regex, include, stop, refused).run())
        return format_grep(matches, current_dir(self.ctx, exec), exec, self.config.grepMaxMatches)


def sample_top_level(relative: list[str], paths: list[str], cap: int) -> tuple[list[str], int, int]:
    """Up to ``cap`` of ``paths`` taken round-robin across their top-level entries under the search root.

    ``relative`` holds the same paths relative to the root. Returns the page (grouped by entry, in
    first-seen order), how many entries it covers and how many there are.
    """
    groups: dict[str, list[str]] = {}
    for rel, path in zip(relative, paths, strict=True):
        groups.setdefault(rel.split("/", 1)[0], []).append(path)
    taken: dict[str, list[str]] = {}
    depth = 0
    count = 0
    while count < cap:
        active = [(key, items[depth]) for key, items in groups.items() if depth < len(items)]
        if not active:
            break
        for key, path in active[: cap - count]:
            taken.setdefault(key, []).append(path)
            count += 1
        depth += 1
    return [path for items in taken.values() for path in items], len(taken), len(groups)


# -- grep ----------------------------------------------------------------------------------------


@dataclass
class Matches:
    """Matching lines grouped by file, files in first-seen order."""

    files: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    count: int = 0

    def add(self, path: str, number: int, text: str) -> None:
        self.files.setdefault(path, []).append((number, text))
        self.count += 1

    def without(self, refused: Callable[[str], bool]) -> Matches:
        """These matches minus the files a search must not show."""
        kept = Matches()
        for path, lines in self.files.items():
            if not refused(path):
                kept.files[path] = lines
                kept.count += len(lines)
        return kept


def line_text(raw: bytes) -> str:
    """A matched line as shown: terminator dropped, cut at 2000 bytes, non-UTF-8 replaced by a note."""
    raw = raw.rstrip(b"\n").rstrip(b"\r")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "(line is not valid UTF-8)"
    if len(raw) > MAX_LINE_BYTES:
        return raw[:MAX_LINE_BYTES].decode("utf-8", "ignore") + " (line truncated)"
    return raw.decode("utf-8")


def _rg_bytes(field_value: dict[str, Any]) -> bytes:
    if "text" in field_value:
        return str(field_value["text"]).encode("utf-8", "surrogateescape")
    return base64.b64decode(field_value.get("bytes", ""))


async def rg_grep(rg: str, root: str, pattern: str, include: str | None) -> Matches:
    argv = [rg, "--json", f"--regexp={pattern}"]
    if include:
        argv.append(f"--glob={include}")
    cwd = root if os.path.isdir(root) else os.path.dirname(root)
    code, out, err = await run_rg([*argv, "--sort=path", "--", root], cwd)
    matches = Matches()
    for line in out.splitlines():
        if b'"type":"match"' not in line:
            continue
        data = json.loads(line)["data"]
        path = _rg_bytes(data["path"]).decode("utf-8", "surrogateescape")
        matches.add(path, int(data["line_number"]), line_text(_rg_bytes(data["lines"])))
    if code == 2 and not matches.count:
        if "regex parse error" in err or "error parsing regex" in err:
            raise SearchError(f"grep pattern rejected by ripgrep: {err}", "SEARCH_INVALID_PATTERN")
        raise SearchError(f"grep search failed (exit 2): {err}", "SEARCH_FAILED")
    return matches


def _ignore_rules(directory: str, in_repo: bool) -> list[Rule]:
    rules: list[Rule] = []
    names = (".gitignore", ".ignore", ".rgignore") if in_repo else (".ignore", ".rgignore")
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                rules.extend(parse_ignore(f.read(), directory))
        except OSError:
            continue
    return rules


def _repo_root(path: str) -> str | None:
    current = path
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _inherited_rules(root: str) -> list[Rule]:
    """Ignore rules of the directories above ``root`` (shallowest first), as ripgrep reads them."""
    repo = _repo_root(root)
    chain = []
    current = os.path.dirname(root)
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    rules: list[Rule] = []
    for directory in reversed(chain):
        rules.extend(_ignore_rules(directory, repo is not None and directory.startswith(repo)))
    return rules


def grep_file(path: str, regex: re.Pattern[str], matches: Matches) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    if b"\0" in data:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")
    if regex.search(text) is None:
        return
    for number, line in enumerate(text.split("\n"), 1):
        if regex.search(line) is not None:
            matches.add(path, number, line_text(line.encode("utf-8", "surrogateescape")))


class PythonGrep:
    """ripgrep's default filtering in Python: hidden entries skipped, ignore files honoured, binaries skipped.

    An ``include`` glob, like ripgrep's ``--glob``, selects files even when they are hidden or ignored.
    """

    def __init__(
        self,
        root: str,
        regex: re.Pattern[str],
        include: str | None,
        stop: threading.Event,
        refused: Callable[[str], bool],
    ) -> None:
        self.root = root
        self.refused = refused
        self.regex = regex
        self.include = compile_glob(include) if include else None
        self.stop = stop
        self.repo = _repo_root(root)
        self.matches = Matches()

    def run(self) -> Matches:
        if os.path.isdir(self.root):
            self.walk(self.root, _inherited_rules(self.root))
        elif not self.refused(self.root):
            grep_file(self.root, self.regex, self.matches)
        return self.matches

    def walk(self, directory: str, rules: list[Rule]) -> None:
        if self.stop.is_set():
            return
        rules = rules + _ignore_rules(directory, self.repo is not None)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if self.refused(entry.path):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            visible = not entry.name.startswith(".")
            if stat.S_ISDIR(st.st_mode):
                if visible and not ignored(rules, entry.path, True):
                    self.walk(entry.path, rules)
            elif stat.S_ISREG(st.st_mode) and self.selects(entry.path, visible, rules):
                grep_file(entry.path, self.regex, self.matches)

    def selects(self, path: str, visible: bool, rules: list[Rule]) -> bool:
        if self.include is not None:
            return self.include.match(path[len(self.root.rstrip("/")) + 1 :]) is not None
        return visible and not ignored(rules, path, False)


def format_grep(matches: Matches, cwd: str, exec: ToolExec, cap: int = GREP_LIMIT) -> str:
    if not matches.count:
        return "No matches found"
    groups: list[str] = []
    shown = 0
    full: list[str] = []
    for path, lines in matches.files.items():
        header = display(path, cwd)
        rows = [f"Line {number}: {text}" for number, text in lines]
        full.append("\n".join([header, *rows]))
        if shown < cap:
            take = rows[: cap - shown]
            shown += len(take)
            groups.append("\n".join([header, *take]))
    total = matches.count
    if total <= cap:
        noun = "match" if total == 1 else "matches"
        return f"Found {total} {noun}\n\n" + "\n\n".join(groups)
    whole = f"Found {total} matches\n\n" + "\n\n".join(full)
    spilled = save(exec.session.id if exec.session else "", "grep", whole)
    if spilled is None:
        footer = "(The complete match list could not be saved; narrow pattern, path or include to see more.)"
    else:
        footer = f"(Full grep result stored at: {spilled}. {SPILL_HINT})"
    return f"Found {cap} of {total} matches\n\n" + "\n\n".join(groups) + f"\n\n{footer}"


name = "tool-fs-search"
inject = (TOOLS,)
optional = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: Config) -> None:
    """Register ``glob`` and ``grep`` and their guidance sections."""
    tools = ctx.require(TOOLS)
    body = SearchTools(ctx, config)
    glob_cap, grep_cap = config.globMaxResults, config.grepMaxMatches
    over_cap = (
        "a sample spread across the top-level entries is shown"
        if config.sampleOverCapGlobResults
        else f"the first {glob_cap} are shown"
    )
    tools.register(
        ctx,
        ToolDefinition(
            "glob",
            "Find files (not directories) whose path matches a glob pattern; hidden and ignored files are included. "
            f"Paths come oldest-modified first, at most {glob_cap}; when there are more, {over_cap} and the "
            "location of the complete list is reported.",
            GLOB,
            body.glob,
            timeout_ms=TIMEOUT_MS,
        ),
    )
    tools.register(
        ctx,
        ToolDefinition(
            "grep",
            "Search file contents for a ripgrep regular expression and return the matching lines with their line "
            f"numbers, grouped by file. At most {grep_cap} matches are shown; for more, the location of the "
            "complete match list is reported.",
            GREP,
            body.grep,
            timeout_ms=TIMEOUT_MS,
        ),
    )
    system_prompt = ctx.get(SYSTEM_PROMPT)
    if system_prompt is None:
        return
    system_prompt.section(
        ctx,
        "tool:glob",
        1400,
        "To find files by path pattern, use the glob tool rather than shell find.",
        interpolate=False,
    )

    def grep_guidance(agent: Any) -> str:
        text = "To search file contents, use the grep tool rather than shell grep or rg."
        if tools.lookup(agent, "read") is not None:
            text += " When you need the lines around a match, read the matched file."
        return text

    system_prompt.section(ctx, "tool:grep", 1500, grep_guidance, interpolate=False)
