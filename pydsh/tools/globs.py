"""Gitignore-style globs and ignore files for the pure-Python search fallback (spec 05 §4.6–4.7).

A pattern without a ``/`` matches a name at any depth; with one it is anchored to its base
directory. ``**``, ``*``, ``?``, ``[…]`` and ``{a,b}`` are supported, as ripgrep does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _class(pattern: str, i: int) -> tuple[str, int]:
    """Translate the ``[...]`` starting at ``pattern[i]``; returns (regex, next index)."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    if negate:
        j += 1
    start = j
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 1
    if j >= len(pattern):
        return re.escape("["), i + 1
    body = pattern[start:j].replace("\\", "\\\\").replace("[", "\\[")
    return (f"[^/{body}]" if negate else f"[{body}]"), j + 1


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    depth = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                at_start = i == 0 or pattern[i - 1] == "/"
                if at_start and pattern.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            regex, i = _class(pattern, i)
            out.append(regex)
            continue
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * depth)
    return "".join(out)


def compile_glob(pattern: str) -> re.Pattern[str] | None:
    """A matcher of ``/``-separated paths relative to the base (``None`` for a directory-only pattern)."""
    if pattern.endswith("/"):
        return None
    anchored = "/" in pattern
    body = pattern.lstrip("/") if anchored else f"**/{pattern}"
    return re.compile(f"(?s:{_translate(body)})\\Z")


@dataclass(frozen=True)
class Rule:
    """One ignore-file line, relative to the directory holding the file."""

    base: str
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def parse_ignore(text: str, base: str) -> list[Rule]:
    """The rules of a ``.gitignore`` / ``.ignore`` file located in ``base``."""
    rules = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if raw.endswith("\\ "):
            line = raw[:-2] + " "
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated or line.startswith("\\"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        body = line.lstrip("/") if anchored else f"**/{line}"
        rules.append(Rule(base, re.compile(f"(?s:{_translate(body)})\\Z"), negated, dir_only))
    return rules


def ignored(rules: list[Rule], path: str, is_dir: bool) -> bool:
    """Whether ``path`` (absolute) is ignored: the last matching rule decides."""
    verdict = False
    for rule in rules:
        if rule.dir_only and not is_dir:
            continue
        prefix = rule.base if rule.base.endswith("/") else rule.base + "/"
        if path.startswith(prefix) and rule.regex.match(path[len(prefix) :]):
            verdict = not rule.negated
    return verdict
