"""Start-up stays light: ``--profile sdk`` and ``headless`` start without importing pydantic."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from pydsh.testing.mock_model_server import MockModelServer

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('modules:', *sorted(m for m in sys.modules if m.startswith('pydantic')), "
    "file=sys.__stderr__))\n"
    "from pydsh.apps.cli import main\n"
    "sys.argv = ['pydsh', *sys.argv[1:]]\n"
    "main()\n"
)
"""``pydsh`` that reports the pydantic modules it imported when it exits."""


def pydantic_modules(stderr: str) -> list[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("modules:"))
    return line.split()[1:]


async def test_the_sdk_server_initializes_without_pydantic(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LAUNCHER,
        "--profile",
        "sdk",
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    params = {"cwd": str(tmp_path), "provider": "deepseek-official", "model": "deepseek-v4-flash"}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
    ]
    stdin = "".join(json.dumps(r) + "\n" for r in requests).encode()
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    responses = [json.loads(line) for line in out.decode().splitlines()]
    assert responses[0]["result"]["serverInfo"]["name"] == "deepseek-harness-sdk-runtime", err.decode()
    assert pydantic_modules(err.decode()) == []


async def test_a_headless_run_never_imports_pydantic(tmp_path: Path) -> None:
    async with MockModelServer(sequence=[{"text": "Done."}]) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DEEPSEEK_BASE_URL": server.base_url,
            "DEEPSEEK_API_KEY": "sk-test",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LAUNCHER,
            "headless",
            "say done",
            cwd=tmp_path,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert out.decode().strip() == "Done.", err.decode()
    assert pydantic_modules(err.decode()) == []
