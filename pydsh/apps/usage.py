"""The one usage error of the command line and its apps, and the argument parser that raises it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

from pydsh.kernel.errors import PydshError

T = TypeVar("T")


class UsageError(PydshError):
    """A command line asked for something impossible: ``error: <message>`` on stderr, then ``exit_code``.

    The apps exit 2 on a usage error; the launcher's own options exit 1.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(f"error: {message}")
        self.message = message
        self.exit_code = exit_code


class LaunchFailed(PydshError):
    """A profile that cannot be composed or loaded: ``line`` on stderr, then exit ``exit_code``."""

    def __init__(self, line: str, exit_code: int) -> None:
        super().__init__(line)
        self.line = line
        self.exit_code = exit_code


class UsageParser(argparse.ArgumentParser):
    """``argparse`` that raises :class:`UsageError` where it would print and exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parsed(parse: Callable[[list[str]], T], args: list[str]) -> T | int:
    """An app's options, or the exit code after a usage error (printed) or ``--help`` (already printed)."""
    try:
        return parse(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:
        return int(exc.code or 0)
