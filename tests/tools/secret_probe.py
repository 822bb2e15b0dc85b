"""Tries to read the API key back through every model tool in every sandbox mode; prints the results as JSON.

Run as ``python -m tests.tools.secret_probe <workspace>`` in a process whose initial environment holds
``DEEPSEEK_API_KEY`` (tests/tools/test_protected.py does); it never prints the key itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.tools.harness import FS, POLICY, harness, text_of

ROWS = [*FS, ("tool-fs-search", None), ("tool-bash", None), ("tool-str-replace-editor", None), *POLICY[:2]]
PERSISTENT = [("tools", None), ("persistent-bash", None), *POLICY[:2]]
SHELL_COMMANDS = ("env", "cat /proc/self/environ", "cat /proc/$PPID/environ", "cat /proc/$PPID/task/*/environ")
MODES = ("read-only", "workspace-write", "danger-full-access")


def attempts() -> list[tuple[str, dict[str, Any]]]:
    pid = os.getpid()
    environ = [f"/proc/{pid}/environ", "/proc/self/environ", "/proc/thread-self/environ"]
    calls: list[tuple[str, dict[str, Any]]] = [("read", {"file_path": path}) for path in environ]
    calls += [("read", {"file_path": "environ-link"})]
    calls += [("grep", {"pattern": "DEEPSEEK", "path": path}) for path in [*environ, "/proc/self", f"/proc/{pid}"]]
    calls += [("grep", {"pattern": "DEEPSEEK", "path": "environ-link"})]
    calls += [("glob", {"pattern": "*", "path": "/proc/self"})]
    calls += [("str_replace_editor", {"command": "view", "path": path}) for path in environ]
    calls += [("bash", {"description": "Show the environment", "command": command}) for command in SHELL_COMMANDS]
    return calls


async def probe(workspace: Path) -> list[dict[str, Any]]:
    results = []
    (workspace / "environ-link").symlink_to("/proc/self/environ")
    for mode in MODES:
        h = await harness(workspace, [*ROWS, ("permission", {"mode": mode})], startup=True)
        try:
            for name, args in attempts():
                outcome = await h.call(name, args)
                results.append({"mode": mode, "tool": name, "args": args, "text": text_of(outcome)})
        finally:
            await h.close()
        shell = await harness(workspace, [*PERSISTENT, ("permission", {"mode": mode})], startup=True)
        try:
            for command in SHELL_COMMANDS:
                outcome = await shell.call("bash", {"command": command})
                results.append(
                    {"mode": mode, "tool": "persistent-bash", "args": {"command": command}, "text": text_of(outcome)}
                )
        finally:
            await shell.close()
    return results


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(Path(sys.argv[1])))))
