"""The persistent bash of the minimal preset: state, markers, clipping, timeout and shell death (spec 05 §4.13)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import AGENT_DISPOSED
from pydsh.policy.sandbox import Bwrap
from pydsh.session.events import make_header
from pydsh.session.log import Session
from pydsh.tools.editor import MAX_OUTPUT, clip
from pydsh.tools.persistent_bash import HEAD_BYTES, MARKER_WINDOW, READ_CHUNK, OutputBuffer
from tests.tools.harness import POLICY, FakeAgent, Harness, harness, text_of

RESET = (
    "The persistent bash shell was reset; the next bash call starts from the workspace with a fresh current "
    "directory and environment."
)


async def world(tmp_path: Path, config: Any = None, extra: list[tuple[str, Any]] | None = None) -> Harness:
    return await harness(tmp_path, [("tools", None), ("persistent-bash", config), *(extra or [])], startup=True)


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    w = await world(tmp_path)
    yield w
    await w.close()


async def run(h: Harness, command: str) -> str:
    return await h.text("bash", {"command": command})


async def test_state_persists_between_calls(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    assert await run(h, 'cd sub; export GREETING=hi; shout() { echo "$1!"; }') == (
        "\n[Command finished with exit code 0]"
    )
    assert await run(h, 'pwd; echo "$GREETING"; shout hey') == (
        f"{tmp_path / 'sub'}\nhi\nhey!\n[Command finished with exit code 0]"
    )


async def test_exit_codes_stderr_and_stdin(h: Harness) -> None:
    assert await run(h, "echo out; echo err >&2; false") == "out\nerr\n[Command finished with exit code 1]"
    assert await run(h, "printf 'a\\n\\n\\n'") == "a\n[Command finished with exit code 0]"
    assert await run(h, "cat; echo after-cat") == "after-cat\n[Command finished with exit code 0]"
    assert await run(h, "[ -t 1 ] && echo tty") == "tty\n[Command finished with exit code 0]"
    assert await run(h, 'for i in 1 2; do\n  echo "n$i"\ndone') == "n1\nn2\n[Command finished with exit code 0]"


async def test_long_output_is_clipped(h: Harness) -> None:
    out = await run(h, "seq 1 10000")
    body, tail = out.split("<response clipped>")
    assert len(body) == 16000
    assert tail.startswith("<NOTE>To save on context only part of this file has been shown to you.")
    assert tail.endswith("</NOTE>\n[Command finished with exit code 0]")


async def test_many_megabytes_of_output_keep_the_buffer_bounded(h: Harness, tmp_path: Path) -> None:
    command = (
        "head -c 6000000 /dev/zero | tr '\\0' a; echo; echo last; touch printed; while [ ! -e go ]; do sleep 0.02; done"
    )
    call = asyncio.ensure_future(run(h, command))
    for _ in range(3000):
        if (tmp_path / "printed").exists() or call.done():
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    shell = next(iter(h.tools.lookup(None, "bash").execute.shells.values()))  # type: ignore[union-attr]
    held = len(shell.buffer)
    (tmp_path / "go").touch()
    out = await call
    assert held <= HEAD_BYTES + MARKER_WINDOW + READ_CHUNK
    assert out == clip("a" * 6000000 + "\nlast") + "\n[Command finished with exit code 0]"


def feed_all(buffer: OutputBuffer, data: bytes, size: int) -> int:
    """Feed ``data`` in ``size``-byte reads; the largest number of bytes held meanwhile."""
    peak = 0
    for i in range(0, len(data), size):
        buffer.feed(data[i : i + size])
        peak = max(peak, len(buffer))
    return peak


def framed(token: str, body: bytes, code: int = 0) -> bytes:
    start = f"stale output\n__PYDSH_{token}_START__\n".encode()
    return start + body + f"\n__PYDSH_{token}_END_{code}__\ntrailing".encode()


@pytest.mark.parametrize("size", [1, 2, 7, 33, 64, 4096])
def test_markers_split_across_reads_are_found(size: int) -> None:
    buffer = OutputBuffer("00ff00ff00ff00ff")
    feed_all(buffer, framed("00ff00ff00ff00ff", b"hello\nworld\n\n", 42), size)
    assert (buffer.code, buffer.text()) == (42, "hello\nworld")


@pytest.mark.parametrize(
    "body",
    [
        b"x" * 1_000_000,
        "\u00e9".encode() * 300_000,
        b"a" + b"\n" * 500_000 + b"b" + b"\n" * 500_000,
        b"head" + b"\n" * 1_000_000,
        b"\xff\xfe" * 200_000 + b"tail",
    ],
    ids=["ascii", "two-byte", "newlines-then-text", "only-newlines-after", "invalid-utf8"],
)
def test_a_huge_body_is_held_bounded_and_clipped_as_in_full(body: bytes) -> None:
    buffer = OutputBuffer("0123456789abcdef")
    peak = feed_all(buffer, framed("0123456789abcdef", body, 3), 1000)
    assert peak <= HEAD_BYTES + MARKER_WINDOW + 1000
    assert buffer.code == 3
    assert clip(buffer.text()) == clip(body.decode("utf-8", "replace").rstrip("\n"))
    assert len(clip(buffer.text())) <= MAX_OUTPUT + 400


def test_before_the_start_marker_and_after_the_end_little_is_kept() -> None:
    idle = OutputBuffer()
    idle.feed(b"y" * 100_000)
    assert len(idle) == 0
    waiting = OutputBuffer("0123456789abcdef")
    feed_all(waiting, b"y" * 1_000_000, 4096)
    assert len(waiting) <= HEAD_BYTES
    finished = OutputBuffer("0123456789abcdef")
    finished.feed(framed("0123456789abcdef", b"ok"))
    finished.feed(b"z" * 100_000)
    assert (finished.text(), len(finished)) == ("ok", 2)


async def test_shell_exit_and_kill_reset_the_shell(h: Harness, tmp_path: Path) -> None:
    await run(h, "export KEPT=1")
    assert await run(h, "echo bye; exit 3") == f"bye\n[shell exited: code 3]\n{RESET}"
    assert await run(h, 'echo "[${KEPT-}]"; pwd') == f"[]\n{tmp_path}\n[Command finished with exit code 0]"
    assert await run(h, "kill -9 $$") == f"[shell killed by signal: SIGKILL]\n{RESET}"
    assert await run(h, "echo alive") == "alive\n[Command finished with exit code 0]"


async def test_timeout_resets_the_shell(tmp_path: Path) -> None:
    h = await world(tmp_path, {"timeoutMs": 500})
    try:
        await run(h, "export KEPT=1")
        out = await run(h, "echo partial; sleep 5")
        assert out == (
            "Your command timed out after 0.5 seconds or experienced an OOM error. Below is partial output:\n"
            f"partial\n[Command timed out or OOM]\n{RESET}"
        )
        assert await run(h, 'echo "[${KEPT-}]"') == "[]\n[Command finished with exit code 0]"
    finally:
        await h.close()


async def test_configured_description_and_schema(tmp_path: Path) -> None:
    h = await world(tmp_path, {"description": "Run commands in a bash shell\n* custom"})
    try:
        (schema,) = h.tools.schemas(None)
        assert schema == {
            "name": "bash",
            "description": "Run commands in a bash shell\n* custom",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": schema["parameters"]["properties"]["command"]["description"],
                    }
                },
                "required": ["command"],
            },
        }
        assert h.tools.execution_mode(h.exec("bash", {"command": "true"})) == "exclusive"
    finally:
        await h.close()


async def test_one_shell_per_agent(h: Harness, tmp_path: Path) -> None:
    await run(h, "export MINE=first")
    other = FakeAgent(Session(make_header("s-2", 1, cwd=str(tmp_path))), h.agent.ctx)
    exec = h.exec("bash", {"command": 'echo "[${MINE-}]"'})
    exec.agent = other  # type: ignore[assignment]
    exec.session = other.session
    assert text_of(await h.run(exec)) == "[]\n[Command finished with exit code 0]"
    assert await run(h, 'echo "$MINE"') == "first\n[Command finished with exit code 0]"
    h.kernel.ctx.emit(AGENT_DISPOSED, {"agent": h.agent})
    assert await run(h, 'echo "[${MINE-}]"') == "[]\n[Command finished with exit code 0]"


async def test_confined_under_the_sandbox(tmp_path: Path) -> None:
    path, detail = await Bwrap().find()
    if path is None:
        pytest.skip(f"bubblewrap is not usable here: {detail or 'bwrap not on PATH'}")
    h = await world(tmp_path, None, POLICY)
    try:
        assert await run(h, "touch inside.txt && echo ok") == "ok\n[Command finished with exit code 0]"
        denied = await run(h, "touch /etc/pydsh-persistent-probe")
        assert "Read-only file system" in denied
        assert denied.endswith("[Command finished with exit code 1]")
    finally:
        await h.close()
