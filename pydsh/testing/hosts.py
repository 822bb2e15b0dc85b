"""``scripted_host``: a :class:`pydsh.Host` whose model answers from a script, for users' own tests.

A script is a list of compact entries, one per model call, in order (or one such list per
session): ``{"text": "..."}``, ``{"reasoning": "...", "text": "..."}``,
``{"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}``,
``{"error": {"code": "RATE_LIMIT", "message": "..."}}`` — see ``pydsh/llm/scripted.py``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

from pydsh.host import DEFAULT_PROFILE, Host, Patch
from pydsh.llm.keys import LLM_REPLAY

FAST_RETRY = {"mode": "normal", "backoff": {"initialDelayMs": 1, "maxDelayMs": 1, "jitterRatio": 0}}
SCRIPTED_PROVIDERS: list[dict[str, Any]] = [
    {
        "id": "deepseek-official",
        "name": "DeepSeek (scripted)",
        "retryPolicy": FAST_RETRY,
        "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000}],
    }
]
"""The default route served by the script: the profile's default model, retried without delay."""


def scripted_patch(
    script: list[Any], providers: list[dict[str, Any]] | None = None, *, pace_ms: int = 0
) -> list[dict[str, Any]]:
    """The patch that replaces the DeepSeek adapter by a scripted one serving ``providers``' routes, each streamed
    chunk ``pace_ms`` after the last."""
    catalog = providers if providers is not None else SCRIPTED_PROVIDERS
    replay: dict[str, Any] = {"scripts": copy.deepcopy(script), "providers": copy.deepcopy(catalog)}
    if pace_ms:
        replay["paceMs"] = pace_ms
    return [
        {"id": "llm-deepseek", "disabled": True},
        {"insert": [{"id": "llm-replay", "name": "llm-replay", "config": replay}]},
    ]


class ScriptedHost(Host):
    """A host whose model is a ``ScriptedAdapter``: no key, no network, a temporary home unless given
    (hosts open at the same time share one)."""

    temporary_home = True

    def __init__(
        self,
        script: list[Any],
        *,
        profile: str = DEFAULT_PROFILE,
        patches: Sequence[Patch] = (),
        cwd: str | os.PathLike[str] | None = None,
        dsh_home: str | os.PathLike[str] | None = None,
        providers: list[dict[str, Any]] | None = None,
    ) -> None:
        from pydsh.llm.scripted import ScriptedAdapter

        ScriptedAdapter(script)
        super().__init__(profile, patches=[scripted_patch(script, providers), *patches], cwd=cwd, dsh_home=dsh_home)

    def assert_consumed(self) -> None:
        """Fail unless every scripted model call was made (call it at the end of a test)."""
        self.ctx.require(LLM_REPLAY).assert_consumed()


def scripted_host(
    script: list[Any],
    *,
    profile: str = DEFAULT_PROFILE,
    patches: Sequence[Patch] = (),
    cwd: str | os.PathLike[str] | None = None,
    dsh_home: str | os.PathLike[str] | None = None,
    providers: list[dict[str, Any]] | None = None,
) -> ScriptedHost:
    """A :class:`ScriptedHost` answering from ``script``; open it with ``async with``.

    The scripted routes are ``providers`` (default: ``deepseek-official`` / ``deepseek-v4-flash``,
    the profile's default model); ``patches`` apply after the scripted one.
    """
    return ScriptedHost(script, profile=profile, patches=patches, cwd=cwd, dsh_home=dsh_home, providers=providers)
