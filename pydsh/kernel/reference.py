"""DeepSeek Harness compositions on pydsh: plugin-name aliases, the reference's config keys and its rule
for keys it does not know.

Imported only when a row names a ``@deepseek-ai/`` plugin or a config fails validation, so the
start-up path never pays for it. The README section "Coming from DeepSeek Harness" lists this table.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from difflib import get_close_matches
from typing import Any

from pydsh.kernel.errors import KernelError

DSH = "@deepseek-ai/dsh-"

ALIASES: dict[str, str] = {
    "@deepseek-ai/dsh-agent-preset-registry": "agent-presets",
    "@deepseek-ai/dsh-compaction-tool-result-pruner": "tool-result-pruner",
    "@deepseek-ai/dsh-experimental-agent-team": "agent-teams",
    "@deepseek-ai/dsh-experimental-tool-agent-team": "tool-agent-team",
    "@deepseek-ai/dsh-goal": "goals",
    "@deepseek-ai/dsh-jobs-local": "jobs",
    "@deepseek-ai/dsh-llm-deepseek-api-key": "llm-deepseek",
    "@deepseek-ai/dsh-permission-presets": "permission",
    "@deepseek-ai/dsh-sdk-jsonrpc-server": "sdk-server",
    "@deepseek-ai/dsh-session-query-sqlite": "session-query",
    "@deepseek-ai/dsh-tool-bash-persistent": "persistent-bash",
    "@deepseek-ai/dsh-tool-subagent-control": "agent-messaging",
    "@deepseek-ai/dsh-user-approval": "approval",
}
"""Reference plugins whose pydsh counterpart has another name. Any other ``@deepseek-ai/dsh-<x>``
resolves to pydsh's plugin ``<x>`` when one is installed (spec 01 §8)."""

BUILT_IN: dict[str, str] = {
    "@deepseek-ai/dsh-bash-sandbox": "tool-bash runs commands in the sandbox itself",
    "@deepseek-ai/dsh-command-goal": "/goal is one of the host's commands (pydsh.host.commands)",
    "@deepseek-ai/dsh-fs-local": "the file tools read the local filesystem themselves",
    "@deepseek-ai/dsh-fs-sandbox": "the file tools apply the sandbox themselves",
    "@deepseek-ai/dsh-sandbox-local": "the sandbox backend is part of sandbox-policy",
    "@deepseek-ai/dsh-subagent-fork-in-process": "the subagent row provides the fork provider",
    "@deepseek-ai/dsh-subagent-spawn-in-process": "the subagent row provides the spawn provider",
    "@deepseek-ai/dsh-subprocess-local": "tools start their processes themselves",
    "@deepseek-ai/dsh-tool-subagent-control/list-agents": "agent-messaging registers list_agents",
    "@deepseek-ai/dsh-web": "tool-web fetches by itself",
    "@deepseek-ai/dsh-web-fetch-http": "tool-web fetches over HTTP itself, with the same limits",
}
"""Reference plugins whose role pydsh fills inside another row: named in the skip warning."""

SAME_NAME = frozenset(
    {
        "acp",
        "agent",
        "agent-default-model",
        "agent-instructions",
        "agent-loop",
        "agent-preset",
        "command-compact",
        "compaction-basic",
        "fs-observation-policy",
        "goal-round-driver",
        "llm",
        "llm-retry",
        "persona",
        "plan-mode",
        "repeat-tool-reminder",
        "sandbox-policy",
        "session",
        "session-checkpoint-policy",
        "session-persistence-jsonl",
        "session-projection",
        "session-title",
        "spill-policy",
        "subagent",
        "system-prompt",
        "time-context",
        "token-meter",
        "tool-ask-user",
        "tool-bash",
        "tool-fs",
        "tool-fs-search",
        "tool-goal",
        "tool-jobs",
        "tool-skill",
        "tool-subagent",
        "tool-todo",
        "tool-web",
        "tool-working-directory",
        "tools",
        "user-questions",
        "web-app",
        "working-directory",
    }
)
"""pydsh plugins whose reference counterpart has the same name (``@deepseek-ai/dsh-<name>``), read off the
reference's composed profiles (``dsh --profile P --dump-config`` for web, headless, sdk, sdk-minimal, acp)."""

LENIENT = SAME_NAME | frozenset(ALIASES.values())
"""pydsh plugins that stand for a reference plugin. The reference validates a config by its schema and
drops every key the schema does not name, at any depth, without a word (0.2.1rc2: a patch putting
``persona`` on ``system-prompt``, or unknown keys inside ``permission``'s presets, starts it), while it
still refuses a known key of the wrong type. So on these rows pydsh ignores a key it does not know, with
one warning naming it; on pydsh's own plugins (``llm-openai-compat``, ``mcp-client``, ``invariants``,
third-party plugins, …) an unknown key stays an error."""


@dataclass(frozen=True)
class Key:
    """One reference config key: renamed to ``to``, silently accepted at ``native``, else inert."""

    to: str | None = None
    native: Any = None
    hint: str = ""


INERT = Key()

KEYS: dict[str, dict[str, Key]] = {
    "agent-default-model": {"reasoningEffort": INERT},
    "agent-loop": {"agents": Key(native=[], hint="agents start through a frontend")},
    "approval": {"policy": Key(hint="the permission row's mode decides when to ask")},
    "llm-deepseek": {
        key: INERT
        for key in (
            "maxRequestFilesBytes",
            "maxInlineRequestImageBytes",
            "maxImagesPerRequest",
            "imageOffloadByteQuantum",
            "inlineImageOffloadByteQuantum",
            "imageOffloadCountQuantum",
            "filesApiTimeoutMs",
            "fileExpiresAfterSeconds",
            "fileRefreshMarginSeconds",
            "fileQuotaCleanupBatch",
        )
    },
    "jobs": {key: INERT for key in ("maxConcurrentJobsPerOwner", "retainBytes", "settledRetainBytes", "pumpPollMs")},
    "permission": {
        "defaultPreset": Key(to="mode"),
        "presets": Key(hint="pydsh has the three fixed modes read-only, workspace-write, danger-full-access"),
    },
    "sandbox-policy": {
        "mode": Key(hint="set the permission row's mode or DSH_PERMISSION_MODE"),
        "workspaceRoot": Key(hint="the workspace is the session's working directory"),
    },
    "session-persistence-jsonl": {"listConcurrency": INERT},
    "session-query": {
        key: INERT
        for key in (
            "path",
            "openAt",
            "journalMode",
            "defaultLimit",
            "maxLimit",
            "snippetChars",
            "readWindowMax",
            "persistedReadConcurrency",
            "preparedSessionCacheSize",
        )
    },
    "persistent-bash": {"backendType": INERT, "maxOutputChars": INERT},
    "tool-bash": {"enableRunInBackground": INERT, "promoteOnTimeout": INERT},
    "tool-fs": {
        key: INERT for key in ("readImage", "readLimit", "readMaxBytes", "readMaxLineLength", "readStreamMinSize")
    },
    "tool-fs-search": {
        key: INERT
        for key in (
            "grepMaxLineBytes",
            "searchMetaMaxBytes",
            "rawOutputMaxBytes",
            "graceMs",
            "stderrMaxBytes",
            "timeoutMs",
        )
    },
    "tool-jobs": {
        "waitTimeoutMs": Key(to="defaultWaitMs"),
        "maxWaitTimeoutMs": Key(to="maxWaitMs"),
        "completionDelivery": INERT,
        "maxConsecutiveWakes": INERT,
    },
    "tool-subagent": {"agentPreset": INERT, "allowedAgentPresets": INERT, "modelSelectionSettings": INERT},
    "tool-todo": {"allowParallelInProgress": Key(native=True)},
    "tool-web": {
        "search": Key(native=False, hint="web_search is out of scope"),
        "searchMaxResults": INERT,
        "searchMaxQueries": INERT,
        "searchTimeoutMs": INERT,
        "fetchTimeoutMs": Key(hint="web_fetch has a 30000 ms budget and its own timeoutMs"),
        "fetchMaxOutputChars": Key(to="maxOutputChars"),
    },
    "tools": {"mode": Key(native="native", hint="pydsh calls tools natively"), "maxParallelSubCalls": INERT},
    "web-app": {
        "openBrowser": Key(hint="pass --no-open to pydsh web"),
        "printUrl": INERT,
        "publicUrl": INERT,
        "surfaceContext": INERT,
    },
    "working-directory": {"defaultDirectory": Key(hint="sessions start in the cwd their frontend gives")},
}
"""Per pydsh plugin: the reference's config keys its ``Config`` does not carry under that name."""


def alias(name: str) -> str | None:
    """The pydsh plugin name of a reference plugin with another name, else ``None``."""
    return ALIASES.get(name)


def canonical(name: str) -> str:
    """``name`` as pydsh calls it: aliased, or without the ``@deepseek-ai/dsh-`` prefix."""
    return ALIASES.get(name) or name.removeprefix(DSH)


def skip_warning(row_id: str, name: str) -> str:
    """The one warning for a reference row pydsh has no plugin for."""
    why = BUILT_IN.get(name)
    reason = f"pydsh has no such plugin ({why})" if why else "pydsh has no such plugin"
    return f'row "{row_id}" ({name}) skipped: {reason}'


def adapt(plugin: str, raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """``raw`` with the reference's keys renamed or dropped, and the inert keys' notes; ``None`` if none apply."""
    known = KEYS.get(plugin)
    if not known or not known.keys() & raw.keys():
        return None
    out: dict[str, Any] = {}
    inert: list[str] = []
    for key, value in raw.items():
        rule = known.get(key)
        if rule is None:
            out[key] = value
        elif rule.to is not None:
            out.setdefault(rule.to, value)
        elif rule.native is None or value != rule.native:
            hint = f"; {rule.hint}" if rule.hint else ""
            inert.append(f"{key}: a DeepSeek Harness key that has no effect here{hint}")
    return out, inert


def reads_leniently(plugin: str) -> bool:
    """Whether keys pydsh does not know are ignored on ``plugin``'s rows, as the reference ignores them."""
    return plugin in LENIENT


def unknown_key_note(location: tuple[Any, ...], model: Any) -> str:
    """The one warning for a key pydsh ignores: where it is and, for a top-level key, the key it resembles."""
    path = ".".join(str(part) for part in location)
    note = f"{path}: a key pydsh does not know; ignored, as DeepSeek Harness ignores keys it does not know"
    if len(location) == 1 and isinstance(location[0], str):
        close = get_close_matches(location[0], known_keys(model), n=1, cutoff=0.8)
        if close:
            note += f' (did you mean "{close[0]}"?)'
    return note


def known_keys(model: Any) -> list[str]:
    """The config keys a ``Config`` model declares (none when the plugin takes no config)."""
    names: list[str] = []
    for klass in reversed(getattr(model, "__mro__", ())):
        names += [n for n in vars(klass).get("__annotations__", {}) if not n.startswith(("_", "model_"))]
    return list(dict.fromkeys(names))


def without(config: Any, locations: list[tuple[Any, ...]]) -> tuple[Any, list[tuple[Any, ...]]]:
    """A copy of ``config`` without the keys at ``locations``, and the locations that were found and removed."""
    out = copy.deepcopy(config)
    removed = []
    for location in locations:
        holder = out
        for part in location[:-1]:
            holder = _child(holder, part)
        if isinstance(holder, dict) and location and location[-1] in holder:
            del holder[location[-1]]
            removed.append(location)
    return out, removed


def _child(value: Any, part: Any) -> Any:
    """``value[part]`` for a dict key or a list index, else ``None`` (the location is not in the raw config)."""
    if isinstance(value, dict):
        return value.get(part)
    if isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
        return value[part]
    return None


_QUOTED = r"""(?:'([^'$]*)'|"([^"$]*)")"""
_HOME = re.compile(rf"dshHomePath\(\s*(?:{_QUOTED})?\s*\)")
_ENV = re.compile(rf"process\.env\.([A-Za-z_][A-Za-z0-9_]*)(?:\s*(?:\?\?|\|\|)\s*{_QUOTED})?")


def js_form(expression: str) -> str:
    """The interpolation form of a ``!!js`` expression pydsh understands; any other is an error.

    ``dshHomePath('x')`` is ``${home:x}``, ``process.cwd()`` is ``${cwd}``, ``process.env.NAME`` is
    ``${env:NAME}`` and ``process.env.NAME ?? 'd'`` (or ``||``) is ``${env:NAME:-d}``.
    """
    text = expression.strip()
    if text == "process.cwd()":
        return "${cwd}"
    home = _HOME.fullmatch(text)
    if home is not None:
        sub = home.group(1) if home.group(1) is not None else home.group(2)
        return f"${{home:{sub}}}" if sub else "${home}"
    env = _ENV.fullmatch(text)
    if env is not None:
        name, single, double = env.groups()
        default = single if single is not None else double
        return f"${{env:{name}}}" if default is None else f"${{env:{name}:-{default}}}"
    raise KernelError(
        "COMPOSITION_INVALID",
        f'unsupported !!js expression "{text}": pydsh has no expression language; write a literal or '
        "${env:NAME}, ${env:NAME:-default}, ${home:sub/dir} or ${cwd}",
    )
