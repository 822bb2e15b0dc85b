"""Ray loads with the Ray backend only: never at start-up, never for a local batch."""

from __future__ import annotations

import subprocess
import sys


def test_no_module_but_the_ray_backend_imports_ray() -> None:
    probe = (
        "import sys, pydsh.apps.cli, pydsh.batch.cli, pydsh.batch.runner, pydsh.batch.local, pydsh.batch.worker,"
        " pydsh.batch.gate, pydsh.batch.progress\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout == "[]\n"
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, pydsh.batch.ray_backend; print('ray' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout == "True\n"
