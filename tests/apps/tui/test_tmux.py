"""End to end in a real terminal: a bare ``pydsh`` in tmux against the loopback mock model — type a prompt,
answer the approval with a key, read the captured pane, quit with Ctrl+C twice and find the terminal clean."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from pydsh.session.persistence.jsonl import log_text
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


def pydsh_command(home: Path, base_url: str) -> str:
    """A bare ``pydsh`` in a shell command line, with its home and the mock model's address."""
    env = {
        "DSH_HOME": str(home),
        "DEEPSEEK_BASE_URL": base_url,
        "DEEPSEEK_API_KEY": "sk-test",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "TERM": "xterm-256color",
    }
    return " ".join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "pydsh"])


class Tmux:
    """One detached tmux server of its own (``-L``), so the test never touches the user's sessions."""

    def __init__(self, name: str) -> None:
        self.base = ["tmux", "-L", name]

    def start(self, command: str, cwd: Path) -> None:
        """A detached session ``tui`` of 100×30 running ``command`` in ``cwd``."""
        self.run("new-session", "-d", "-s", "tui", "-x", "100", "-y", "30", "-c", str(cwd), command)

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
        # tmux may mark the pane dead (its terminal closed) long before it reaps the process under load, so
        # the exit status comes from a shell that writes it to a file once pydsh has ended
        command = f"sh -c '{pydsh_command(isolated_home, server.base_url)}; echo $? > {tmp_path / 'exit-status'}'"
        tmux.start(command, workspace)
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
            exit_file = tmp_path / "exit-status"
            for _ in range(300):  # the shell around pydsh writes its exit status once it has ended
                if exit_file.exists() and exit_file.read_text().strip():
                    break
                await asyncio.sleep(0.1)
            assert exit_file.exists() and exit_file.read_text().strip() == "0", tmux.pane()
            leftover = [line for line in tmux.pane().splitlines() if line.strip() and "Pane is dead" not in line]
            assert leftover == [], leftover
        finally:
            subprocess.run([*tmux.base, "kill-server"], capture_output=True, timeout=10)


async def test_closing_the_terminal_during_a_turn_logs_the_turn_aborted(isolated_home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    tmux = Tmux(f"pydsh-hangup-{os.getpid()}")
    async with MockModelServer(sequence=["stall"], repeat_last=True) as server:
        tmux.start(pydsh_command(isolated_home, server.base_url), workspace)
        try:
            await tmux.shows("Ask anything")
            pid = int(tmux.run("display-message", "-p", "-t", "tui", "#{pane_pid}").strip())
            tmux.keys("-l", "a turn that never ends")
            tmux.keys("Enter")
            await tmux.shows("running")
        finally:
            subprocess.run([*tmux.base, "kill-server"], capture_output=True, timeout=10)
        for _ in range(200):
            if not Path(f"/proc/{pid}").exists():
                break
            await asyncio.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists(), "pydsh outlived its terminal"
    (log,) = (isolated_home / "sessions").glob("*/*/session.v4.jsonl.zstd")
    events = [json.loads(line) for line in log_text(log.read_bytes(), log, compressed=True).splitlines()[1:]]
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["aborted"]


async def test_a_profile_that_cannot_compose_ends_the_screen_with_its_one_line(
    isolated_home: Path, tmp_path: Path
) -> None:
    """The terminal's screen comes up before its profile is composed, so a bad patch is found behind it: the
    screen closes, the terminal is clean, and the one-line error and exit code are those of any other path."""
    bad = tmp_path / "bad.yml"
    bad.write_text("rows: [\n")
    tmux = Tmux(f"pydsh-test-bad-{os.getpid()}")
    status = tmp_path / "exit-status"
    command = f"sh -c '{pydsh_command(isolated_home, 'http://127.0.0.1:9')} tui --patch {bad}; echo $? > {status}'"
    tmux.start(command, tmp_path)
    try:
        tmux.run("set-option", "-t", "tui", "remain-on-exit", "on")
        for _ in range(300):
            if status.exists() and status.read_text().strip():
                break
            await asyncio.sleep(0.1)
        assert status.exists() and status.read_text().strip() == "2", tmux.pane()
        pane = tmux.run("capture-pane", "-p", "-J", "-S", "-", "-t", "tui")
        lines = [line for line in pane.splitlines() if line.strip() and "Pane is dead" not in line]
        assert len(lines) == 1 and lines[0].startswith(f"pydsh: {bad}: malformed YAML"), pane
    finally:
        subprocess.run([*tmux.base, "kill-server"], capture_output=True, timeout=10)
