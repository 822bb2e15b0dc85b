"""The public API stands on the application layer alone: opening a host and running an agent loads no
frontend, no SDK wire module and no pydantic (whose import alone costs a fifth of the start-up budget)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import asyncio, sys, tempfile
import pydsh, pydsh.testing

async def main():
    with tempfile.TemporaryDirectory() as workspace:
        async with pydsh.testing.scripted_host([{"text": "hi"}], cwd=workspace) as host:
            result = await (await host.create_agent()).run("hello")
            assert (result.final_response, result.finish_reason) == ("hi", "completed"), result

asyncio.run(main())
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("pydantic", "pydantic_core") or m.startswith(("pydsh.sdk", "pydsh.apps"))
)
print("LOADED=" + ",".join(loaded))
"""


def test_open_host_and_run_load_neither_pydantic_nor_the_sdk_nor_a_frontend(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "DSH_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "LOADED="
