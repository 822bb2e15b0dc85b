"""Images of ``pydsh web``: the prompt's image blocks admitted through the shared code of every frontend
(:mod:`pydsh.images.prompt`), and the stored copies served back to the page by their content id.

The hub imports this module when the web profile loads, so starlette is imported only where a request is
answered (the web stack loads when the server starts serving)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydsh.apps.web.errors import ApiError, not_found
from pydsh.images.keys import ATTACHMENTS
from pydsh.images.prompt import ImagePromptError, admit_images, vision_model
from pydsh.images.store import ImageError, sniff
from pydsh.kernel.context import Context

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

ATTACHMENT_ID = re.compile(r"sha256:[0-9a-f]{64}")
TOO_LARGE = frozenset({"IMAGE_TOO_LARGE", "IMAGE_DIMENSION_TOO_LARGE", "IMAGE_TOO_MANY_PIXELS", "TOO_MANY_IMAGES"})
"""Refusals about size, answered 413; every other refusal of an image is 422."""


def blocks(text: str, images: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
    """The prompt as the agent takes it: its text alone, or content blocks (text first, then the images)."""
    if not images:
        return text
    head = [{"type": "text", "text": text}] if text.strip() else []
    return [*head, *images]


async def admitted(
    ctx: Context, agent: Any, prompt: list[dict[str, Any]] | str, route: dict[str, Any] | None
) -> list[dict[str, Any]] | str:
    """``prompt`` with its images stored and logged by reference (checked against ``route``, the model the page
    selected, if any); a 4xx naming the reason otherwise."""
    if isinstance(prompt, str):
        return prompt
    try:
        return await admit_images(ctx, agent, prompt, route)
    except ImagePromptError as exc:
        status = 413 if exc.code in TOO_LARGE else 422
        raise ApiError(status, "image_refused", str(exc)) from None


async def check_route(ctx: Context, route: dict[str, Any] | None) -> None:
    """Refuse a new session's first prompt images before the session exists, when its route is text-only."""
    capable, model = await vision_model(ctx, None, route)
    if not capable:
        raise ApiError(422, "image_refused", f'Model "{model}" does not support image input.')


def attachment(ctx: Context, request: Request) -> Response:
    """``GET /api/attachments/{id}``: a stored image by its ``sha256:`` id, typed by its own signature."""
    from starlette.responses import Response

    attachment_id: str = request.path_params["attachmentId"]
    store = ctx.get(ATTACHMENTS)
    if store is None or not ATTACHMENT_ID.fullmatch(attachment_id):
        raise not_found("That attachment")
    try:
        data = store.read({"attachmentId": attachment_id})
    except ImageError:
        raise not_found("That attachment") from None
    media = sniff(data)
    if media is None:
        raise not_found("That attachment")
    return Response(data, media_type=media, headers={"Content-Disposition": "inline"})
