"""User images in prompts, shared by every frontend: ``{type: "image", data: <base64>, mimeType}`` blocks
become stored references, after one check that the session's model takes images at all."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydsh.agent.loop import route_of
from pydsh.images.keys import ATTACHMENTS
from pydsh.images.store import MAX_IMAGES_PER_MESSAGE, MEDIA_TYPES, ImageError
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.llm.keys import LLM


class ImagePromptError(PydshError):
    """A prompt's images refused; the message is the one the frontend shows, ``code`` says why."""

    def __init__(self, message: str, code: str = "INVALID_IMAGE") -> None:
        super().__init__(message)
        self.code = code


def has_image(blocks: list[dict[str, Any]]) -> bool:
    """Whether a prompt carries an image block."""
    return any(b.get("type") == "image" for b in blocks)


async def vision_model(ctx: Context, agent: Any, route: dict[str, Any] | None = None) -> tuple[bool, str]:
    """Whether the route (by default the agent's own) declares image input, and its model."""
    route = route or route_of(ctx, agent)
    llm = ctx.get(LLM)
    if llm is None or not llm.has_adapter(route["provider"]):
        return False, route["model"]
    info = await llm.resolve_model_info(route["provider"], route["model"])
    return "image" in (info.get("inputModalities") or ()), route["model"]


async def admit_images(
    ctx: Context, agent: Any, blocks: list[dict[str, Any]], route: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``blocks`` with each inline image stored and replaced by its reference; ``ImagePromptError`` otherwise.

    ``route`` is the one the agent's next step takes when a frontend switched it (else the agent's own)."""
    if not has_image(blocks):
        return blocks
    store = ctx.get(ATTACHMENTS)
    if store is None:
        raise ImagePromptError("image prompt requires an attachment store", "NO_ATTACHMENT_STORE")
    capable, model = await vision_model(ctx, agent, route)
    if not capable:
        raise ImagePromptError(f'Model "{model}" does not support image input.', "TEXT_ONLY_MODEL")
    if sum(b.get("type") == "image" for b in blocks) > MAX_IMAGES_PER_MESSAGE:
        raise ImagePromptError(f"a prompt may carry at most {MAX_IMAGES_PER_MESSAGE} images", "TOO_MANY_IMAGES")
    return [_stored(store, b) if b.get("type") == "image" else b for b in blocks]


def _stored(store: Any, block: dict[str, Any]) -> dict[str, Any]:
    media = block.get("mimeType")
    if media not in MEDIA_TYPES or not isinstance(block.get("data"), str):
        raise ImagePromptError(f"image blocks must carry base64 data of one of {', '.join(MEDIA_TYPES)}")
    try:
        ref = store.save(base64.b64decode(block["data"], validate=True), media)
    except (binascii.Error, ValueError):
        raise ImagePromptError("image data is not valid base64") from None
    except ImageError as exc:
        raise ImagePromptError(str(exc), exc.code) from None
    order = ("attachmentId", "mediaType", "width", "height", "bytes")
    return {"type": "image", "attachment": {key: ref[key] for key in order}}
