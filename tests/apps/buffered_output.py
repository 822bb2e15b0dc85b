"""A test plugin that leaves text in ``sys.stdout``'s buffer before any frontend took fd 1 for frames."""

from __future__ import annotations

import sys

from pydsh.kernel.context import Context

print("buffered before the frames", end="")  # a pipe is block-buffered: this stays in the buffer

name = "buffered-output"


def apply(ctx: Context, config: None) -> None:
    sys.stdout.write("")
