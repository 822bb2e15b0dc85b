"""``pydsh demo`` runs the bundled task offline and really fixes the sample project."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_offline_and_fixes_the_file(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEPSEEK_")}
    env["DSH_HOME"] = str(tmp_path / "home")
    result = subprocess.run(
        [sys.executable, "-m", "pydsh", "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "now returns `a - b`" in result.stdout
    assert "→ edit" in result.stderr
    fixed = re.search(r"the fixed file is (\S+)", result.stderr)
    assert fixed is not None
    assert "return a - b" in Path(fixed.group(1)).read_text()


def test_demo_takes_no_arguments(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pydsh", "demo", "x"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 1
    assert "takes no arguments" in result.stderr
