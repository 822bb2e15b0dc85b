"""The one rule for a session's workspace where it enters: an existing directory, named by a usable path."""

from __future__ import annotations

import json
import os

from pydsh.agent.cwd import directory_problem
from pydsh.host.errors import HostError
from pydsh.kernel.text import without_lone_surrogates


def check_workspace(path: str) -> str:
    """``path`` made absolute, or ``HostError(bad_workspace)`` naming what is wrong with it.

    A workspace that is missing, a file or not a file name at all would leave every tool and every
    runtime note of the session failing, so it is refused before a session is created or resumed.
    """
    problem = directory_problem(path)
    if problem is not None:
        raise HostError(f"cwd {quoted(path)} {problem}", "bad_workspace")
    return os.path.abspath(path)


def quoted(path: str) -> str:
    """A path as a JSON string literal with control characters escaped and unpaired surrogates shown as
    U+FFFD, so the message stays one printable line."""
    return json.dumps(without_lone_surrogates(path), ensure_ascii=False)
