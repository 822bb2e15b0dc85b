"""Images over the stored budgets (2048x2048 pixels, 4 MiB) are kept as a smaller copy, as the reference
keeps them, and the model sees the copy; bytes that only look like an image are refused."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from pydsh.images.store import STORED_MAX_BYTES, STORED_MAX_PIXELS, AttachmentStore, ImageError, probe
from tests.images.images import logged
from tests.images.test_sdk_images import calls, results, run


def noise_png(width: int, height: int, block: int = 1) -> bytes:
    """A PNG of random pixels (it compresses to nearly its raw size), in squares of ``block`` pixels."""
    small = (max(1, width // block), max(1, height // block))
    image = Image.frombytes("RGB", small, os.urandom(small[0] * small[1] * 3)).resize((width, height))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def test_an_image_over_the_pixel_budget_is_stored_as_a_smaller_copy_of_the_same_shape(tmp_path: Path) -> None:
    store = AttachmentStore(tmp_path)
    ref = store.save(noise_png(3000, 2000, block=8), "image/png")
    assert ref["width"] * ref["height"] <= STORED_MAX_PIXELS
    assert abs(ref["width"] / ref["height"] - 1.5) < 0.01
    data = store.read(ref)
    assert len(data) == ref["bytes"] <= STORED_MAX_BYTES
    found = probe(data)
    assert (found.media_type, found.width, found.height) == (ref["mediaType"], ref["width"], ref["height"])


def test_a_transparent_image_stays_a_png_and_keeps_its_alpha(tmp_path: Path) -> None:
    image = Image.new("RGBA", (2500, 2500), (0, 128, 255, 0))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    store = AttachmentStore(tmp_path)
    ref = store.save(buffer.getvalue(), "image/png")
    assert ref["mediaType"] == "image/png" and ref["width"] == ref["height"] == 2048
    with Image.open(io.BytesIO(store.read(ref))) as copy:
        assert copy.mode == "RGBA" and copy.getchannel("A").getextrema() == (0, 0)


def test_an_image_within_the_budgets_is_stored_as_it_came(tmp_path: Path) -> None:
    data = noise_png(64, 48)
    store = AttachmentStore(tmp_path)
    assert store.read(store.save(data, "image/png")) == data


def test_a_header_over_budget_over_bytes_that_do_not_decode_is_an_invalid_image(tmp_path: Path) -> None:
    bogus = noise_png(4, 4)[:16] + (3000).to_bytes(4, "big") + (3000).to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    with pytest.raises(ImageError) as caught:
        AttachmentStore(tmp_path).save(bogus + os.urandom(64), "image/png")
    assert caught.value.code == "INVALID_IMAGE"


async def test_read_image_of_a_file_over_the_byte_budget_sends_the_smaller_copy(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shot.png").write_bytes(noise_png(2560, 1600))  # under the pixel budget, three times the byte budget
    server = await run(tmp_path, calls("shot.png"), "look")
    [content] = results(server)
    [result] = [r for r in logged(tmp_path / "home", "t1") if r["type"] == "tool/result"]
    ref = result["data"]["message"]["content"][1]["attachment"]
    assert ref["bytes"] <= STORED_MAX_BYTES
    assert (ref["mediaType"], ref["width"], ref["height"]) == ("image/jpeg", 2560, 1600)  # re-encoded, not resized
    assert f"request preview {ref['width']}x{ref['height']}px" in content[1]["text"]
    assert content[2]["source"]["media_type"] == ref["mediaType"]


def test_pillow_is_imported_only_by_an_image_that_needs_a_smaller_copy() -> None:
    code = "import sys, pydsh.images.store, pydsh.images.tool, pydsh.images.prompt; print('PIL' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
