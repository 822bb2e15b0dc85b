"""C6: starlette, uvicorn and sse-starlette load only for ``pydsh web``, never on the headless or SDK paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from pydsh.testing.hosts import scripted_patch

PROBE = """
import asyncio, sys
from pydsh.apps.cli import main
import pydsh.apps.sdk, pydsh.sdk.client, pydsh.host
from pydsh.testing.hosts import scripted_host

code = main(["headless", "--patch", sys.argv[1], "say hi"])
assert code == 0, code

async def embedded():
    async with scripted_host([{"text": "hi"}]) as host:
        agent = await host.create_agent()
        await agent.run("hi")

asyncio.run(embedded())
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"starlette", "uvicorn", "sse_starlette"})
print("HEAVY=" + ",".join(heavy))
"""


def run_probe(tmp_path: Path, probe: str) -> str:
    patch = tmp_path / "scripted.yml"
    patch.write_text(yaml.safe_dump(scripted_patch([{"text": "hello"}])))
    done = subprocess.run(
        [sys.executable, "-c", probe, str(patch)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_headless_and_sdk_paths_do_not_import_the_web_stack(tmp_path: Path) -> None:
    assert run_probe(tmp_path, PROBE) == "HEAVY="


def test_loading_the_web_profile_does_not_import_it_either_until_it_serves(tmp_path: Path) -> None:
    probe = """
import asyncio, sys
from pydsh.testing.hosts import scripted_host

from pydsh.host.keys import APP

async def main():
    async with scripted_host([{"text": "hi"}], profile="web") as host:
        assert host.ctx.get(APP) is not None
asyncio.run(main())
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"starlette", "uvicorn", "sse_starlette"})
print("HEAVY=" + ",".join(heavy))
"""
    assert run_probe(tmp_path, probe) == "HEAVY="
