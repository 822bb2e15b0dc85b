"""Permission knobs as folds over the session log: modes, policies and presets (spec 05 §5.1–5.2)."""

from __future__ import annotations

import os
from typing import Any

from pydsh.session.events import Event
from pydsh.session.log import Session

MODES = ("read-only", "workspace-write", "danger-full-access")
RANK = {mode: i for i, mode in enumerate(MODES)}
POLICIES = ("ask", "never")
PRESETS: dict[str, tuple[str, str]] = {
    "read-only": ("read-only", "ask"),
    "workspace-write": ("workspace-write", "ask"),
    "danger-full-access": ("danger-full-access", "never"),
}


class LastValue:
    """Fold unit: ``data[field]`` of the last event of one type (``None`` before any)."""

    def __init__(self, key: str, event_type: str, field: str) -> None:
        self.key = key
        self.event_type = event_type
        self.field = field

    def init(self) -> str | None:
        return None

    def fold(self, state: str | None, event: Event) -> str | None:
        if event["type"] == self.event_type:
            value: Any = event["data"].get(self.field)
            return value if isinstance(value, str) else state
        return state


SANDBOX_MODE = LastValue("sandboxMode", "sandbox/mode", "mode")
APPROVAL_POLICY = LastValue("approvalPolicy", "approval/policy", "policy")
PERMISSION_PRESET = LastValue("permissionPreset", "permission/preset", "preset")


def preset_name(mode: str, policy: str) -> str:
    """The preset whose knobs are ``(mode, policy)``, or ``custom``."""
    for name, knobs in PRESETS.items():
        if knobs == (mode, policy):
            return name
    return "custom"


def workspace_root(session: Session) -> str:
    """The session workspace: its header ``cwd`` canonicalised (the process cwd without one)."""
    return os.path.realpath(str(session.header.get("cwd") or os.getcwd()))
