"""Small images built in memory for the image tests, and a reader of a session's logged records."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from tests.logs import log_lines, stored_log


def png(width: int, height: int) -> bytes:
    """A red RGB PNG of the given size, without metadata (stored as it is, as the reference stores it)."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def logged(home: Path, session_id: str) -> list[dict[str, Any]]:
    """Every record of one session's log under ``home``."""
    return [json.loads(line) for line in log_lines(stored_log(home / "sessions", session_id))]
