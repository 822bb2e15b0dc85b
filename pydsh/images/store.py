"""Content-addressed image attachments, laid out as DeepSeek Harness lays them out.

An image lives once at ``$DSH_HOME/attachments/v1/objects/<2 hex>/<sha256>`` (read-only); the session
log holds only its reference ``{attachmentId: "sha256:<hex>", mediaType, bytes, width, height[, name]}``,
so a request is rebuilt from the log plus this store, and the reference runtime reads the same files.
An image over 2048x2048 pixels or 4 MiB is stored as a smaller copy (``scale.py``), as the reference
stores it; its reference gives the copy's size.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydsh.images.scale import Undecodable, fit
from pydsh.kernel.errors import PydshError

MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
EXTENSIONS = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""Largest submitted image (the reference's default)."""
MAX_IMAGES_PER_MESSAGE = 20
MAX_IMAGE_DIMENSION = 8192
MAX_IMAGE_PIXELS = 64_000_000
STORED_MAX_PIXELS = 2048 * 2048
"""Beyond this an image is stored as a smaller copy (as the reference stores it)."""
STORED_MAX_BYTES = 4 * 1024 * 1024


class ImageError(PydshError):
    """An image the store refuses; ``code`` is the reference's attachment error code."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Probe:
    """What the header of an encoded image says."""

    media_type: str
    width: int
    height: int


def sniff(data: bytes) -> str | None:
    """The media type the file signature declares, or ``None`` for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def probe(data: bytes) -> Probe:
    """Media type and pixel size from the header; ``INVALID_IMAGE`` when the bytes do not say."""
    media = sniff(data)
    size = _SIZES[media](data) if media is not None else None
    if media is None or size is None or min(size) <= 0:
        raise ImageError("Unsupported or malformed image data.", "INVALID_IMAGE")
    return Probe(media, *size)


def _png(data: bytes) -> tuple[int, int] | None:
    return struct.unpack(">II", data[16:24]) if data[12:16] == b"IHDR" and len(data) >= 24 else None


def _gif(data: bytes) -> tuple[int, int] | None:
    return struct.unpack("<HH", data[6:10]) if len(data) >= 10 else None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        length = struct.unpack(">H", data[at + 2 : at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


_SIZES = {"image/png": _png, "image/gif": _gif, "image/jpeg": _jpeg, "image/webp": _webp}


def admit(data: bytes, declared: str | None = None) -> Probe:
    """The probe of an image the store accepts as it is; the reference's error codes otherwise."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError("Image exceeds the configured byte limit.", "IMAGE_TOO_LARGE")
    found = probe(data)
    if declared is not None and found.media_type != declared:
        raise ImageError("Declared image type does not match its bytes.", "IMAGE_TYPE_MISMATCH")
    if max(found.width, found.height) > MAX_IMAGE_DIMENSION:
        raise ImageError("Image exceeds the configured dimension limit.", "IMAGE_DIMENSION_TOO_LARGE")
    if found.width * found.height > MAX_IMAGE_PIXELS:
        raise ImageError("Image exceeds the configured pixel limit.", "IMAGE_TOO_MANY_PIXELS")
    return found


def stored_form(data: bytes, found: Probe) -> tuple[bytes, Probe]:
    """The bytes the store keeps for an admitted image: itself, or a smaller copy when it is over budget."""
    if found.width * found.height <= STORED_MAX_PIXELS and len(data) <= STORED_MAX_BYTES:
        return data, found
    try:
        smaller = fit(data, found.width, found.height, STORED_MAX_PIXELS, STORED_MAX_BYTES)
    except Undecodable:
        raise ImageError("Unsupported or malformed image data.", "INVALID_IMAGE") from None
    if smaller is None:
        raise ImageError("Image exceeds the configured byte limit.", "IMAGE_TOO_LARGE")
    return smaller, probe(smaller)


class AttachmentStore:
    """Images below ``<home>/attachments/v1``, each named by the SHA-256 of its bytes."""

    def __init__(self, home: Path) -> None:
        self.root = home / "attachments" / "v1"

    def path(self, ref: dict[str, Any]) -> Path:
        """Where the object of a logged reference lives."""
        digest = str(ref["attachmentId"]).removeprefix("sha256:")
        return self.root / "objects" / digest[:2] / digest

    def save(self, data: bytes, declared: str | None = None, name: str | None = None) -> dict[str, Any]:
        """Store ``data`` (or its smaller copy) once (it may already be there) and return its logged reference."""
        data, found = stored_form(data, admit(data, declared))
        digest = hashlib.sha256(data).hexdigest()
        ref: dict[str, Any] = {"attachmentId": f"sha256:{digest}", "mediaType": found.media_type}
        ref.update(bytes=len(data), width=found.width, height=found.height)
        if name is not None:
            ref["name"] = name
        target = self.path(ref)
        if not target.exists():
            _publish(target, data)
        return ref

    def read(self, ref: dict[str, Any]) -> bytes:
        """The bytes of a logged reference, checked against its digest."""
        try:
            data = self.path(ref).read_bytes()
        except FileNotFoundError:
            raise ImageError("Attachment object is missing.", "ATTACHMENT_NOT_FOUND") from None
        if "sha256:" + hashlib.sha256(data).hexdigest() != ref["attachmentId"]:
            raise ImageError("Stored attachment failed integrity verification.", "ATTACHMENT_CORRUPT")
        return data


def _publish(target: Path, data: bytes) -> None:
    """Write through a private temporary file renamed into place, leaving the object read-only."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(temporary, 0o400)
    os.replace(temporary, target)
