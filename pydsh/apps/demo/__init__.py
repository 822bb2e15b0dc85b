"""``pydsh demo``: a bundled multi-step task replayed offline in a temporary workspace.

The sample project is stored as data (``*.py.txt``) so it is packaged but never imported. The
``headless`` profile runs with the shipped ``demo`` bundle, whose replay adapter serves the
DeepSeek route from a recorded session log: the real loop, tools, sandbox and persistence run;
only the model's answers come from the cassette. No API key or network is needed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK = "Users say subtraction is broken. Find the bug in this project, fix it, and tell me what you changed."


def run_demo(args: list[str]) -> int:
    """Copy the sample project to a temporary workspace and run the bundled task there."""
    from pydsh.apps.cli import Launch, run_profile

    if args:
        print("error: pydsh demo takes no arguments", file=sys.stderr)
        return 1
    scratch = Path(tempfile.mkdtemp(prefix="pydsh-demo-"))
    workspace = scratch / "demo"
    workspace.mkdir()
    for source in (HERE / "workspace").iterdir():
        shutil.copyfile(source, workspace / source.name.removesuffix(".txt"))
    os.environ["PYDSH_DEMO_CASSETTE"] = str(HERE / "cassette.jsonl")
    os.environ.setdefault("DSH_HOME", str(scratch / "home"))
    print(f"pydsh demo: workspace {workspace}", file=sys.stderr)
    print(f"pydsh demo: task: {TASK}\n", file=sys.stderr)
    code = run_profile(Launch(profile="headless", app_args=[TASK, "--cwd", str(workspace)]), ("demo",))
    print(f"\npydsh demo: the fixed file is {workspace / 'calc.py'}", file=sys.stderr)
    return code
