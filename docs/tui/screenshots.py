"""Regenerate the terminal UI screenshots in this folder: SVG from Textual, PNG from the SVG via headless
Chromium (the distribution's ``chromium``). Scripted model, temporary home; nothing leaves the machine.

Run from the repository root: ``python docs/tui/screenshots.py``
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydsh.apps.tui.app import PydshTui
from pydsh.apps.tui.controller import Controller
from pydsh.testing.hosts import ScriptedHost

HERE = Path(__file__).resolve().parent
SIZE = (110, 34)


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


WORK = [
    {
        "reasoning": "Read the file, fix the greeting, run the tests.",
        "text": "Let me look at the module first.",
        **call("read", file_path="greet.py"),
    },
    call(
        "edit",
        file_path="greet.py",
        old_string='    return "hello " + name\n',
        new_string='    """Greet someone by name."""\n    return f"Hello, {name}!"\n',
    ),
    call("bash", command="python -c 'import greet; print(greet.greet(\"Ada\"))'", description="try it"),
    call("grep", pattern="def greet"),
    call(
        "todo_write",
        todos=[
            {"content": "Fix the greeting", "status": "completed"},
            {"content": "Add a docstring", "status": "completed"},
            {"content": "Release", "status": "pending"},
        ],
    ),
    {
        "text": "Done. `greet` now says **Hello, Ada!** and has a docstring:\n\n"
        '```python\ndef greet(name):\n    """Greet someone by name."""\n    return f"Hello, {name}!"\n```\n\n'
        "- read `greet.py`\n- edited the greeting\n- ran it once"
    },
]
APPROVAL = call(
    "bash",
    command="rm -rf build && python -m build",
    description="rebuild",
    sandbox_permissions="danger-full-access",
    justification="the build writes outside the workspace",
)
QUESTION = call(
    "ask_user_question",
    questions=[
        {
            "id": "q1",
            "header": "Release",
            "question": "Which version number should the release get?",
            "options": [
                {"label": "0.2.0", "description": "new features (recommended)"},
                {"label": "0.1.1", "description": "fixes only"},
            ],
        }
    ],
)
TREE = [
    [
        call("subagent", description="scan the tests", prompt="scan the tests", name="scanner"),
        call("subagent", description="review the change", prompt="review the change", name="reviewer"),
        {"text": "Both members are on it."},
        {"text": "The scanner is done."},
        {"text": "Both members reported back."},
    ],
    [{"text": "Scanned 12 test files."}],
    [{"text": "The change looks right."}],
]


async def shoot(name: str, script: list[Any], drive: Callable[[Any, PydshTui], Awaitable[None]], home: Path) -> None:
    workspace = home / "greet"
    workspace.mkdir(exist_ok=True)
    (workspace / "greet.py").write_text('def greet(name):\n    return "hello " + name\n')
    async with ScriptedHost(script, profile="tui", cwd=workspace, dsh_home=home / ".deepseek" / name) as host:
        controller = Controller(host)
        controller.start()
        await controller.open(None)
        app = PydshTui(controller)
        async with app.run_test(size=SIZE) as pilot:
            await drive(pilot, app)
            await pilot.pause(0.3)
            app.save_screenshot(f"{name}.svg", path=str(HERE))
        await controller.shutdown()
    png = HERE / f"{name}.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={png}",
            "--window-size=1000,720",
            (HERE / f"{name}.svg").as_uri(),
        ],
        check=True,
        capture_output=True,
    )


async def send(pilot: Any, app: PydshTui, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def until(pilot: Any, check: Callable[[], bool]) -> None:
    for _ in range(200):
        if check():
            return
        await pilot.pause(0.05)
    raise TimeoutError


async def work(pilot: Any, app: PydshTui) -> None:
    await send(pilot, app, "Fix the greeting in greet.py and add a docstring")
    await app.controller.live.live.when_idle()
    await pilot.pause(0.3)
    edit = next(v for v in app.views.values() if v.block.title == "edit")
    edit.set_expanded(True)
    bash = next(v for v in app.views.values() if v.block.title == "bash")
    bash.set_expanded(True)
    await pilot.pause(0.2)
    app.transcript.scroll_end(animate=False)


async def approval(pilot: Any, app: PydshTui) -> None:
    await send(pilot, app, "Rebuild the package")
    await until(pilot, lambda: bool(app.query_one("#ask").display))


async def question(pilot: Any, app: PydshTui) -> None:
    await send(pilot, app, "Prepare the release")
    await until(pilot, lambda: bool(app.query_one("#questions").display))


async def commands(pilot: Any, app: PydshTui) -> None:
    await pilot.press("slash")


async def agents(pilot: Any, app: PydshTui) -> None:
    await send(pilot, app, "Scan the tests and review the change")
    await app.controller.live.live.when_idle()
    await pilot.pause(0.3)
    await pilot.press("ctrl+t")
    await pilot.pause(0.3)


async def light(pilot: Any, app: PydshTui) -> None:
    app.theme = "textual-light"
    await work(pilot, app)


async def main() -> None:
    os.environ.pop("DEEPSEEK_API_KEY", None)
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        os.environ["HOME"] = str(home)  # the title shows the workspace as ~/greet
        os.environ["DSH_HOME"] = str(home / ".deepseek")
        await shoot("work", WORK, work, home)
        await shoot("approval", [APPROVAL, {"text": "ok"}], approval, home)
        await shoot("question", [QUESTION, {"text": "ok"}], question, home)
        await shoot("commands", [{"text": "ok"}], commands, home)
        await shoot("agents", TREE, agents, home)
        await shoot("light", WORK, light, home)


if __name__ == "__main__":
    asyncio.run(main())
