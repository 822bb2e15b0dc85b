"""End to end in a real terminal: a bare ``pydsh`` in tmux against the loopback mock model — type a prompt,
answer the approval with a key, read the captured pane, quit with Ctrl+C twice and find the terminal clean."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from pydsh.testing.mock_model_server import MockModelServer

REPO = Path(__file__).resolve().parents[3]
ESCALATE = {
    "tool_calls": [
        {
            "name": "bash",
            "arguments": {
                "command": "echo escalated-from-tmux",
                "description": "print a word",
                "sandbox_permissions": "danger-full-access",
                "justification": "the end-to-end test asks for it",
            },
        }
    ]
}


class Tmux:
    """One detached tmux server of its own (``-L``), so the test never touches the user's sessions."""

    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name]

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=10, check=True)
        return done.stdout

    def pane(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "tui", *keys)

    async def shows(self, text: str, timeout: float = 30.0) -> str:
        """The pane once it shows ``text``."""
        for _ in range(int(timeout / 0.1)):
            pane = self.pane()
            if text in pane:
                return pane
            await asyncio.sleep(0.1)
        raise AssertionError(f"the pane never showed {text!r}:\n{self.pane()}")


async def test_a_bare_pydsh_in_tmux_prompts_answers_an_approval_and_quits_clean(
    isolated_home: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    tmux = Tmux(f"pydsh-test-{os.getpid()}")
    async with MockModelServer(sequence=[ESCALATE, {"text": "The command printed its word."}]) as server:
        env = {
            "DSH_HOME": str(isolated_home),
            "DEEPSEEK_BASE_URL": server.base_url,
            "DEEPSEEK_API_KEY": "sk-test",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "TERM": "xterm-256color",
        }
        command = " ".join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "pydsh"])
        tmux.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "-c", str(workspace), command)
        try:
            tmux.run("set-option", "-t", "tui", "remain-on-exit", "on")
            await tmux.shows("Ask anything")
            tmux.keys("-l", "run the command")
            tmux.keys("Enter")
            pane = await tmux.shows("Allow bash?")
            assert "echo escalated-from-tmux" in pane
            assert "[y] allow once" in pane
            tmux.keys("y")
            pane = await tmux.shows("The command printed its word.")
            assert "› run the command" in pane
            assert "bash  echo escalated-from-tmux" in pane
            assert "Allow bash?" not in pane
            tmux.keys("C-c")
            await asyncio.sleep(0.3)
            tmux.keys("C-c")
            for _ in range(100):
                if tmux.run("display-message", "-p", "-t", "tui", "#{pane_dead}").strip() == "1":
                    break
                await asyncio.sleep(0.1)
            status = tmux.run("display-message", "-p", "-t", "tui", "#{pane_dead_status}").strip()
            assert status == "0", tmux.pane()
            leftover = [line for line in tmux.pane().splitlines() if line.strip() and "Pane is dead" not in line]
            assert leftover == [], leftover
        finally:
            subprocess.run([*tmux.base, "kill-server"], capture_output=True, timeout=10)
