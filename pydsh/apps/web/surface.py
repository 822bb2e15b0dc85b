"""The web app's two runtime-context sections (spec 03 §10.2): where pydsh's source checkout lies
(``harness:source``, optional) and the URL the page is served at (``app:web-surface``).

Both are registered when the ``web-app`` plugin loads; the URL section stays empty (so it is left
out of the snapshot) until the server listens, and empties again once it stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydsh
from pydsh.agent.cwd import quote
from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import CONTEXT_ORDER
from pydsh.kernel.context import Context


def source_checkout() -> str | None:
    """The folder holding pydsh's source when it runs from a checkout (a ``pyproject.toml`` beside the package)."""
    root = Path(pydsh.__file__).resolve().parent.parent
    return str(root) if (root / "pyproject.toml").is_file() else None


class WebSurface:
    """What the model is told about the web app: the source checkout and, while serving, the page's URL."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.url: str | None = None

    def source_text(self, _agent: Any) -> str | None:
        if self.source is None:
            return None
        return f"Current DeepSeek Harness implementation checkout: {quote(self.source)}."

    def url_text(self, _agent: Any) -> str | None:
        if self.url is None:
            return None
        return f"Current DeepSeek Harness Web GUI URL: {quote(self.url)}."

    def register(self, ctx: Context) -> None:
        """Add both sections to the system prompt's runtime contexts (when the prompt service is composed)."""
        system_prompt = ctx.get(SYSTEM_PROMPT)
        if system_prompt is None:
            return
        order = CONTEXT_ORDER
        system_prompt.context(ctx, "harness:source", order["HARNESS_SOURCE"], self.source_text, interpolate=False)
        system_prompt.context(ctx, "app:web-surface", order["WEB_SURFACE"], self.url_text, interpolate=False)
