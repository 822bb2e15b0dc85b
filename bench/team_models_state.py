"""Start cost of ``team-models`` with a large state file (issue: the file grew without bound).

Run: python bench/team_models_state.py [--teams 150000] [--live 20]
Seeds a home whose state file holds ``--teams`` Teams, of which ``--live`` belong to stored Lead
sessions and the rest to Leads that no longer exist, then starts a host with Agent Teams in a fresh
process, without the plugin (the median of three) and twice with it: the plugin's start time and
peak memory are the differences from the run without it. Where the plugin prunes in the background, the first start also
reports how long pruning took and the file's size after it; the second start shows the cost once the
file holds only Teams that exist.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "plugins" / "team-models")]

from tests_team_models.world import PLUGIN, PROVIDERS, TEAMS  # noqa: E402

from pydsh.teams.keys import TEAM_ROUTES  # noqa: E402
from pydsh.testing import scripted_host  # noqa: E402

ROUTE = {"provider": "provider-b", "model": "model-b"}


def state_file(home: Path) -> Path:
    return home / "storages" / "team-models" / "state.json"


async def stored_leads(home: Path, count: int) -> list[str]:
    """``count`` Lead sessions that exist in the home's session store."""
    scripts = [[{"text": "ok"}] for _ in range(count)]
    async with scripted_host(scripts, providers=PROVIDERS, patches=[TEAMS], dsh_home=home) as host:
        ids = []
        for _ in range(count):
            lead = await host.create_agent(provider="provider-a", model="model-a")
            await lead.run("hello")
            ids.append(lead.session_id)
    return ids


def seed(home: Path, teams: int, live: int) -> None:
    """A state file in the plugin's own layout: ``live`` Teams of stored Leads, the rest of vanished ones."""
    ids = asyncio.run(stored_leads(home, live)) + [str(uuid.uuid4()) for _ in range(teams - live)]
    body = {"version": 1, "teams": {team: {"overrides": {"grader": ROUTE}} for team in ids}}
    state_file(home).parent.mkdir(parents=True, exist_ok=True)
    state_file(home).write_text(json.dumps(body, indent=2) + "\n")


async def start(home: Path, plugin: bool) -> dict[str, Any]:
    """Open a host (with or without the plugin), wait for any background pruning, and measure."""
    patches: list[Any] = [TEAMS]
    if plugin:
        patches.append([{"insert": [{"id": "team-models", "name": PLUGIN, "config": {}}]}])
    began = time.perf_counter()
    async with scripted_host([], providers=PROVIDERS, patches=patches, dsh_home=home) as host:
        started = time.perf_counter() - began
        pruning = getattr(host.ctx.get(TEAM_ROUTES), "pruning", None)
        if pruning is not None:
            await pruning
        pruned = time.perf_counter() - began - started
    size = state_file(home).stat().st_size if state_file(home).is_file() else 0
    return {"start_s": started, "prune_s": pruned if pruning else None, "peak_mb": peak_mb(), "file_bytes": size}


def peak_mb() -> float:
    """This process's peak resident memory (``VmHWM``; ``ru_maxrss`` carries the parent's peak across exec)."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


def child(home: Path, plugin: bool) -> dict[str, Any]:
    """``start`` in a fresh interpreter, so peak memory is that start's alone."""
    code = f"import asyncio, json, sys; sys.argv[0] = {str(__file__)!r}; import team_models_state as b; "
    code += f"print(json.dumps(asyncio.run(b.start(b.Path({str(home)!r}), {plugin}))))"
    out = subprocess.run([sys.executable, "-c", code], cwd=HERE, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", type=int, default=150_000)
    parser.add_argument("--live", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="team-models-bench-") as tmp:
        home = Path(tmp)
        seed(home, args.teams, args.live)
        print(f"seeded {args.teams} Teams ({args.live} of stored Leads): {state_file(home).stat().st_size:,} bytes")
        bases = sorted((child(home, plugin=False) for _ in range(3)), key=lambda run: run["start_s"])
        base = bases[1]
        for label in ("first start", "second start"):
            run = child(home, plugin=True)
            line = (
                f"{label}: plugin start {run['start_s'] - base['start_s']:.2f} s, "
                f"peak +{run['peak_mb'] - base['peak_mb']:.0f} MB"
            )
            if run["prune_s"] is not None:
                line += f", background pruning {run['prune_s']:.2f} s"
            print(f"{line}, file after {run['file_bytes']:,} bytes")


if __name__ == "__main__":
    main()
