"""Build tiny plugin distributions for the ``pydsh plugin`` tests, installable offline.

Each distribution carries an in-tree build backend that needs only the standard library, so pip
installs it with no index and no build dependencies.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
from pathlib import Path

BACKEND = '''\
"""A build backend needing only the standard library (test distributions only)."""

import base64
import hashlib
import re
import tomllib
import zipfile
from pathlib import Path


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = tomllib.loads(Path("pyproject.toml").read_text())["project"]
    name = re.sub(r"[-_.]+", "_", project["name"])
    info = f"{name}-{project['version']}.dist-info"
    files = {}
    for path in sorted(Path(".").glob("*/**/*")):
        if path.is_file() and (Path(path.parts[0]) / "__init__.py").is_file() and "__pycache__" not in path.parts:
            files[path.as_posix()] = path.read_bytes()
    groups = project.get("entry-points", {})
    entry_points = "".join(
        f"[{group}]\\n" + "".join(f"{k} = {v}\\n" for k, v in eps.items()) for group, eps in groups.items()
    )
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\\nName: {project['name']}\\nVersion: {project['version']}\\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = "".join(f"{p},{_digest(d)},{len(d)}\\n" for p, d in files.items()) + f"{info}/RECORD,,\\n"
    files[f"{info}/RECORD"] = record.encode()
    wheel = f"{name}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel
'''


def make_distribution(
    root: Path,
    name: str,
    package: str,
    *,
    bundles: dict[str, str] | None = None,
    plugins: dict[str, str] | None = None,
    version: str = "0.1.0",
) -> Path:
    """Write a source directory for distribution ``name``: ``bundles`` maps bundle names to their YAML,
    ``plugins`` maps plugin names to module source. Returns the directory."""
    root.mkdir(parents=True)
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / "test_backend.py").write_text(BACKEND)
    lines = [
        "[build-system]",
        "requires = []",
        'build-backend = "test_backend"',
        'backend-path = ["."]',
        "",
        "[project]",
        f'name = "{name}"',
        f'version = "{version}"',
    ]
    if plugins:
        lines += ["", '[project.entry-points."pydsh.plugins"]']
        for plugin, source in plugins.items():
            module = plugin.replace("-", "_")
            (root / package / f"{module}.py").write_text(textwrap.dedent(source))
            lines.append(f'{plugin} = "{package}.{module}"')
    if bundles:
        lines += ["", '[project.entry-points."pydsh.bundles"]']
        for bundle, text in bundles.items():
            (root / package / f"{bundle}.yml").write_text(text)
            lines.append(f'{bundle} = "{package}:{bundle}.yml"')
    (root / "pyproject.toml").write_text("\n".join(lines) + "\n")
    return root


def make_venv(path: Path, *, hide: tuple[str, ...] = ()) -> Path:
    """A virtual environment that also sees this interpreter's packages (pip and pydsh's dependencies)
    while installing into its own; entries of theirs whose name contains one of ``hide`` (an import
    package, its metadata, its editable hook) stay out of sight. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    parents = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()]
    if hide:
        parents = [_mirror(parent, path / f"parent-{i}", hide) for i, parent in enumerate(parents)]
    (Path(own) / "parent-environment.pth").write_text(
        "".join(f"import site; site.addsitedir({str(p)!r})\n" for p in parents)
    )
    return python


def _mirror(parent: Path, mirror: Path, hide: tuple[str, ...]) -> Path:
    """A directory of links to ``parent``'s entries, but for those whose name contains one of ``hide``."""
    mirror.mkdir()
    for entry in parent.iterdir():
        if not any(word in entry.name.lower() for word in hide):
            (mirror / entry.name).symlink_to(entry)
    return mirror


SOURCES = ("pyproject.toml", "README.md", "MANIFEST.in", "pydsh", "plugins")
LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "tests_*")


def build_pydsh_wheel(repo: Path, out: Path) -> Path:
    """pydsh's wheel, built offline from a copy of the checkout as ``pip wheel`` builds it for a user."""
    source = out.parent / "pydsh-source"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (repo / name).is_dir():
            shutil.copytree(repo / name, source / name, ignore=LEFT_OUT)
        else:
            shutil.copy2(repo / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        env={**os.environ, "PIP_NO_INDEX": "1"},
        check=True,
        capture_output=True,
    )
    [wheel] = out.glob("pydsh-*.whl")
    return wheel
