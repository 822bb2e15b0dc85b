"""A third-party panel for the degradation test: its server part serves a client module that throws on import."""

from __future__ import annotations

from typing import Any


def routes(ctx: Any) -> list[Any]:
    """One route: the panel's client module, which fails while it is imported."""
    from starlette.responses import Response
    from starlette.routing import Route

    async def module(request: Any) -> Response:
        return Response("throw new Error('the panel exploded while loading');\n", media_type="text/javascript")

    return [Route("/panel.js", module)]
