"""Textual (and rich) load only when the terminal UI runs: never on the SDK, headless, web or embedding paths,
and not when the ``tui`` profile merely loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from pydsh.testing.hosts import scripted_patch

REPO = Path(__file__).resolve().parents[3]
PROBE = """
import asyncio, sys
from pydsh.apps.cli import main
import pydsh, pydsh.apps.sdk, pydsh.sdk.client, pydsh.host
from pydsh.host.keys import APP
from pydsh.testing.hosts import scripted_host

assert main(["headless", "--patch", sys.argv[1], "say hi"]) == 0

async def embedded():
    async with scripted_host([{"text": "hi"}]) as host:
        await (await host.create_agent()).run("hi")
    for profile in ("web", "tui", "sdk"):
        async with scripted_host([{"text": "hi"}], profile=profile) as host:
            assert host.ctx.get(APP) is not None or profile == "sdk", profile

asyncio.run(embedded())
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"textual", "rich"})
open(sys.argv[2], "w").write("HEAVY=" + ",".join(heavy))
"""


def test_no_start_path_but_the_terminal_ui_imports_textual(tmp_path: Path) -> None:
    patch = tmp_path / "scripted.yml"
    patch.write_text(yaml.safe_dump(scripted_patch([{"text": "hello"}])))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(patch), str(tmp_path / "heavy.txt")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "heavy.txt").read_text() == "HEAVY="
