"""Where secrets live on disk: pydsh's credential file and a short deny-list of well-known locations.

The file tools refuse to read them (``pydsh.tools.protected``) and confined bash sees them masked
(:func:`secret_masks`), so a model tool never hands their contents to the model (decision 0005).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re

from pydsh.kernel.compose import dsh_home

SECRET_LOCATIONS = (
    ".ssh/id_*",
    ".aws/credentials",
    ".config/gcloud",
    ".config/gcloud/*",
    ".config/gh/hosts.yml",
    ".netrc",
    ".docker/config.json",
    ".pypirc",
    ".git-credentials",
    ".kube/config",
)
"""Well-known secret files under the home directory, refused to reads in the confined modes (``*.pub`` excepted)."""
_SECRET_LOCATION = re.compile("|".join(fnmatch.translate(pattern) for pattern in SECRET_LOCATIONS))


def home_dir() -> str:
    """The user's home directory, canonical."""
    return os.path.realpath(os.path.expanduser("~"))


def credential_file() -> str:
    """pydsh's stored API keys (``$DSH_HOME/credentials.json``)."""
    return str(dsh_home() / "credentials.json")


def deny_listed(path: str) -> bool:
    """Whether the canonical ``path`` is a deny-listed secret under the home directory (public keys are not)."""
    home = home_dir().rstrip("/") + "/"
    return path.startswith(home) and not path.endswith(".pub") and _SECRET_LOCATION.match(path[len(home) :]) is not None


def secret_masks() -> list[str]:
    """bubblewrap arguments hiding the credential file and the deny-listed secrets that exist.

    Confined bash sees the whole filesystem read-only; these mounts blank what the file tools
    refuse (an empty file over a file, an empty tmpfs over a directory).
    """
    home = home_dir()
    candidates = [credential_file()]
    for pattern in SECRET_LOCATIONS:
        candidates += [p for p in glob.glob(os.path.join(home, pattern)) if not p.endswith(".pub")]
    args: list[str] = []
    for path in dict.fromkeys(os.path.realpath(p) for p in candidates):
        if os.path.isdir(path):
            args += ["--tmpfs", path]
        elif os.path.isfile(path):
            args += ["--ro-bind", "/dev/null", path]
    return args
