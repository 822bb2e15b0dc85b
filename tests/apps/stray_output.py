"""A test plugin that writes to stdout every way it can once the app exists (the ACP bridge must divert it)."""

from __future__ import annotations

import logging
import os

from pydsh.host.keys import APP
from pydsh.kernel.context import Context

name = "stray-output"
inject = (APP,)


def apply(ctx: Context, config: None) -> None:
    print("stray print")
    os.write(1, b"stray fd write\n")
    logging.getLogger("tests.stray").warning("stray log")
