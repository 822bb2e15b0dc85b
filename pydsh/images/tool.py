"""Plugin ``tool-read-image``: the ``read_image`` tool (texts and checks as DeepSeek Harness has them).

The image is stored once in the attachment store; the tool result carries a short text envelope and an
``image`` block holding only the stored reference, which is what the log records. The request path
(:mod:`pydsh.images.request`) puts the bytes back when the model is called.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydsh.agent.cwd import quote
from pydsh.agent.loop import route_of
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec
from pydsh.images.keys import ATTACHMENTS
from pydsh.images.store import EXTENSIONS, MAX_IMAGE_DIMENSION, MAX_IMAGE_PIXELS, ImageError, sniff
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.tools.files import FsError, canonical, load, resolve

PARAMETERS = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string", "description": "Path to the image file, resolved by the filesystem backend."}
    },
    "required": ["file_path"],
}
DESCRIPTION = (
    "Look at a PNG, JPEG, WebP or GIF file: the image itself comes back to you. Oversized images are scaled "
    "down for you, so there is no need to install image tools or make thumbnails first."
)
FORMATS = "read_image accepts PNG/JPEG/WebP/GIF"
SHRINK = "downscale the image and read the smaller copy"

name = "tool-read-image"
inject = (TOOLS, ATTACHMENTS)
optional = (LLM,)


async def image_capable(ctx: Context, exec: ToolExec) -> tuple[bool, str]:
    """Whether the route of the step that called the tool declares image input, and its model's name: the
    route its logged ``request/header`` names (a frontend's model switch included), else the agent's own."""
    header = exec.agent.session.request_header() if exec.agent is not None else None
    config = header["config"] if header is not None else None
    route = config or route_of(ctx, exec.agent)  # type: ignore[arg-type]  # every tool caller is a loop agent
    llm = ctx.get(LLM)
    if llm is None or not route["model"] or not llm.has_adapter(route["provider"]):
        return False, route["model"]
    info = await llm.resolve_model_info(route["provider"], route["model"])
    return "image" in (info.get("inputModalities") or ()), route["model"]


def declared_type(path: str) -> str | None:
    """The media type the extension claims; ``ToolError`` for an extension that is not an image's."""
    extension = os.path.splitext(path)[1].lower()
    declared = EXTENSIONS.get(extension)
    if declared is None and extension:
        raise ToolError(
            f"cannot read {quote(path)}: the {extension} extension does not declare a supported image format; "
            f"{FORMATS} files, including extension-less files in those formats"
        )
    return declared


def refusal(display: str, extension: str, declared: str | None, media: str, error: ImageError) -> ToolError:
    """The model-facing text of an image the store refused."""
    where = f"cannot read {quote(display)}"
    if error.code == "IMAGE_DIMENSION_TOO_LARGE":
        return ToolError(f"{where}: at least one image side exceeds the {MAX_IMAGE_DIMENSION}px limit; {SHRINK}")
    if error.code == "IMAGE_TOO_MANY_PIXELS":
        return ToolError(f"{where}: the image exceeds the {MAX_IMAGE_PIXELS}-pixel decoded-size limit; {SHRINK}")
    if error.code == "IMAGE_TOO_LARGE":
        return ToolError(f"{where}: the image cannot be stored within the deployment's byte limits; {SHRINK}")
    if error.code == "INVALID_IMAGE" and declared is None:
        return ToolError(
            f"{where}: the bytes do not decode as a supported PNG/JPEG/WebP/GIF image; "
            "the file may be truncated or corrupt"
        )
    if error.code == "IMAGE_TYPE_MISMATCH":
        return ToolError(
            f"{where}: the {extension} extension declares {media}, but the bytes use a different image format; "
            "rename the file to match its actual format if it is PNG/JPEG/WebP/GIF, "
            "or convert it to one of those formats"
        )
    return ToolError(str(error))


class ReadImage:
    """The tool body over the attachment store."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.store = ctx.require(ATTACHMENTS)

    async def __call__(self, args: dict[str, Any], exec: ToolExec) -> dict[str, Any]:
        path = args["file_path"]
        if not path.strip():
            raise ToolError("file_path must be a non-empty string")
        declared = declared_type(path)
        capable, model = await image_capable(self.ctx, exec)
        if not capable:
            raise ToolError(
                f'cannot read {quote(path)} as an image: model "{model}" does not declare image input; '
                "switch to an image-capable model to read images"
            )
        display = resolve(self.ctx, exec, path)
        snapshot = await asyncio.to_thread(load, canonical(display), display, "read")
        if snapshot is None:
            raise FsError(f"cannot read {quote(display)}: not found", "FS_NOT_FOUND")
        media = declared or sniff(snapshot.data)
        if media is None:
            raise ToolError(
                f"cannot read {quote(display)}: the file content is not a supported image format; {FORMATS}"
            )
        try:
            ref = self.store.save(snapshot.data, media, os.path.basename(display))
        except ImageError as exc:
            raise refusal(display, os.path.splitext(path)[1].lower(), declared, media, exc) from None
        return {"path": display, "image": ref}


def envelope(value: dict[str, Any]) -> str:
    """The text beside the image block: path, type, and the image's format, size and bytes."""
    image = value["image"]
    return (
        f"<path>{value['path']}</path>\n<type>image</type>\n<content>\n"
        f"{image['mediaType']} image, {image['width']}x{image['height']} px, {image['bytes']} bytes\n</content>"
    )


def render(args: Any, value: dict[str, Any]) -> list[dict[str, Any]]:
    """The envelope, then the image block holding the stored reference."""
    return [{"type": "text", "text": envelope(value)}, {"type": "image", "attachment": value["image"]}]


def apply(ctx: Context, config: None) -> None:
    """Register ``read_image`` over the attachment store."""
    definition = ToolDefinition(
        "read_image",
        DESCRIPTION,
        PARAMETERS,
        ReadImage(ctx),
        render=render,
        is_concurrency_safe=lambda args: True,
        meta=lambda args, value: {"path": value["path"]},
    )
    ctx.require(TOOLS).register(ctx, definition)
