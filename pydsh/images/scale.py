"""Oversized images made to fit the store's budgets, as DeepSeek Harness stores them.

The image is resized to fit a pixel budget (aspect kept) and encoded again: PNG when it has transparency and
that fits the byte budget, else JPEG at falling quality. Pillow is imported here only, on the first image
that needs it, never at start-up.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydsh.kernel.errors import PydshError

if TYPE_CHECKING:
    from PIL.Image import Image

JPEG_QUALITIES = (85, 75, 60, 45)
"""JPEG qualities tried in turn until the copy fits the byte budget."""
HALVINGS = 4
"""Times the pixel budget is halved when no encoding of a copy fits the byte budget (noise barely compresses)."""


class Undecodable(PydshError):
    """Pillow cannot decode the bytes."""


def fit(data: bytes, width: int, height: int, max_pixels: int, max_bytes: int) -> bytes | None:
    """A copy of ``data`` with at most ``max_pixels`` pixels and ``max_bytes`` bytes (halving the pixels while
    no encoding fits, a few times), ``None`` when none does; :class:`Undecodable` when the bytes do not decode."""
    from PIL import Image as PillowImage

    try:
        with PillowImage.open(io.BytesIO(data)) as image:
            image.seek(0)
            frame = image.convert("RGBA" if _transparent(image) else "RGB")
    except (OSError, ValueError, PillowImage.DecompressionBombError) as exc:
        raise Undecodable(str(exc)) from exc
    for halvings in range(HALVINGS + 1):
        factor = min(1.0, math.sqrt(max_pixels / 2**halvings / (width * height)))
        size = (max(1, math.floor(width * factor)), max(1, math.floor(height * factor)))
        smaller = frame if size == frame.size else frame.resize(size, PillowImage.Resampling.LANCZOS)
        found = next((encoded for encoded in _encodings(smaller) if len(encoded) <= max_bytes), None)
        if found is not None:
            return found
    return None


def _transparent(image: Image) -> bool:
    """Whether the image carries an alpha channel or a transparent palette entry."""
    return image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info


def _encodings(frame: Image) -> Iterator[bytes]:
    """PNG first when the frame has alpha (JPEG cannot keep it), then JPEG at each quality, each made only
    when the one before did not fit."""
    if frame.mode == "RGBA":
        yield _encoded(frame, "PNG", optimize=True)
        frame = frame.convert("RGB")
    for quality in JPEG_QUALITIES:
        yield _encoded(frame, "JPEG", quality=quality)


def _encoded(frame: Image, form: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    frame.save(buffer, form, **options)
    return buffer.getvalue()
