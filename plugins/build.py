"""Building the pydsh wheel: the first-party plugin distributions under ``plugins/`` ship inside it as wheels.

``pyproject.toml`` names :class:`BuildPy` as the ``build_py`` command. After the usual step it builds
each ``plugins/<dir>/`` distribution's own wheel with its own build backend, in a scratch copy of its
source (the checkout stays clean), into ``pydsh/shipped_plugins/`` of the build tree, so that
``pydsh plugin add agent-message`` installs it offline from a wheel install of pydsh
(docs/decisions/0019-shipped-plugins.md). Editable installs skip it: they find the plugins in the
checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools.command.build_py import build_py  # type: ignore[import-untyped]

PLUGINS = Path(__file__).resolve().parent
SHIPPED = ("agent-message", "team-models")
"""The directories under ``plugins/`` whose distributions ship with pydsh."""
TARGET = Path("pydsh") / "shipped_plugins"
BUILD = "import sys, setuptools.build_meta as backend; print(backend.build_wheel(sys.argv[1]))"
LEFT_OUT = shutil.ignore_patterns("*.egg-info", "build", "dist", "__pycache__", "tests_*")


def build_plugin_wheel(source: Path, out: Path) -> Path:
    """Build the wheel of the distribution in ``source`` into ``out``, from a scratch copy of its source."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pydsh-plugin-build-") as scratch:
        tree = Path(scratch) / source.name
        shutil.copytree(source, tree, ignore=LEFT_OUT)
        done = subprocess.run(
            [sys.executable, "-c", BUILD, str(out.resolve())],
            cwd=tree,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"building the wheel of {source} failed:\n{done.stderr}")
    return out / done.stdout.strip().splitlines()[-1]


class BuildPy(build_py):  # type: ignore[misc]
    """``build_py`` that also puts the shipped plugin distributions' wheels into the package."""

    def run(self) -> None:
        """Build pydsh's modules, then (except for an editable install) the plugin wheels beside them."""
        super().run()
        if self.editable_mode:
            return
        for name in SHIPPED:
            build_plugin_wheel(PLUGINS / name, Path(self.build_lib) / TARGET)
