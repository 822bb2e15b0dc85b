"""Images end to end through pydsh's SDK server: ``read_image`` texts and records, prompt images, the
DeepSeek request format, and the one error of a model without image input."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pydsh.sdk.client import AsyncHarness, JsonRpcError
from pydsh.testing.mock_model_server import MockModelServer
from tests.images.images import logged, png

VISION = "deepseek-flash"


def settings(tmp_path: Path, model: str = VISION) -> dict[str, Any]:
    """A pydsh runtime in ``tmp_path`` (home and workspace) on ``model``."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return {"cwd": ws, "dsh_home": home, "api_key": "sk-test", "model": model}


def calls(*paths: str) -> list[dict[str, Any]]:
    """A script calling ``read_image`` once per step on each path, then answering."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_image", "arguments": {"file_path": p}}]} for p in paths
    ]
    return [*steps, {"text": "done"}]


def results(server: MockModelServer) -> list[list[dict[str, Any]]]:
    """The content of the tool result each request after the first answered."""
    out = []
    for request in server.requests[1:]:
        part = request["body"]["messages"][-1]["content"][0]
        out.append(part["content"])
    return out


async def run(tmp_path: Path, script: list[dict[str, Any]], prompt: Any, model: str = VISION) -> MockModelServer:
    """One turn of ``prompt`` against ``script``; the server (with its requests) comes back."""
    async with (
        MockModelServer(sequence=script, repeat_last=True) as server,
        AsyncHarness(base_url=server.base_url, **settings(tmp_path, model)) as harness,
    ):
        await harness.session("t1").run(prompt)
    return server


async def test_read_image_sends_the_image_and_logs_its_reference(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.png").write_bytes(png(4, 3))
    server = await run(tmp_path, calls("a.png"), "look")
    digest = "099d6c9b9262f6ebac0dc90b193c75796c9f4008f2c7b859f593f03e61fe0d35"
    stored = tmp_path / "home" / "attachments" / "v1" / "objects" / digest[:2] / digest
    assert stored.read_bytes() == png(4, 3)
    [content] = results(server)
    assert (
        content[0]["text"]
        == f"<path>{ws / 'a.png'}</path>\n<type>image</type>\n<content>\nimage/png image, 4x3 px, 73 bytes\n</content>"
    )
    assert content[1]["text"] == (
        f'Image "a.png" (sha256:{digest}); request preview 4x3px. Normalized copy (read-only; may be resized or '
        f"re-encoded): {json.dumps(str(stored))} (4x3px, image/png). Source dimensions, format, and byte size may "
        "differ. Copy to a writable path ending in .png before editing."
    )
    data = base64.b64encode(png(4, 3)).decode()
    assert content[2] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    [result] = [r for r in logged(tmp_path / "home", "t1") if r["type"] == "tool/result"]
    assert result["data"]["message"]["content"][1] == {
        "type": "image",
        "attachment": {
            "attachmentId": f"sha256:{digest}",
            "mediaType": "image/png",
            "bytes": 73,
            "width": 4,
            "height": 3,
            "name": "a.png",
        },
    }
    assert result["data"]["meta"] == {"path": str(ws / "a.png")}


async def test_read_image_error_texts(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "t.txt").write_text("hi")
    (ws / "bad.png").write_text("not png")
    (ws / "rawbad").write_text("zzz")
    (ws / "noext").write_bytes(png(5, 2))
    server = await run(tmp_path, calls("missing.png", "t.txt", "bad.png", "rawbad", "noext"), "look")
    texts = [content[0]["text"] for content in results(server)]
    assert texts[:4] == [
        f'Error: cannot read "{ws / "missing.png"}": not found',
        'Error: cannot read "t.txt": the .txt extension does not declare a supported image format; read_image '
        "accepts PNG/JPEG/WebP/GIF files, including extension-less files in those formats",
        "Error: Unsupported or malformed image data.",
        f'Error: cannot read "{ws / "rawbad"}": the file content is not a supported image format; read_image '
        "accepts PNG/JPEG/WebP/GIF",
    ]
    assert texts[4].startswith(f"<path>{ws / 'noext'}</path>\n<type>image</type>\n<content>\nimage/png image, 5x2 px")
    errors = [r["data"].get("error") for r in logged(tmp_path / "home", "t1") if r["type"] == "tool/result"]
    assert errors == [{"name": "FsError", "code": "FS_NOT_FOUND"}, None, None, None, None]


async def test_read_image_on_a_text_only_model_is_a_tool_error(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.png").write_bytes(png(2, 2))
    server = await run(tmp_path, calls("a.png"), "look", model="deepseek-v4-flash")
    assert results(server)[0][0]["text"] == (
        'Error: cannot read "a.png" as an image: model "deepseek-v4-flash" does not declare image input; '
        "switch to an image-capable model to read images"
    )


def image_prompt(data: bytes) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": "look"},
        {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": "image/png"},
    ]


async def test_a_prompt_image_is_stored_logged_and_sent(tmp_path: Path) -> None:
    server = await run(tmp_path, [{"text": "done"}], image_prompt(png(3, 3)))
    digest = "de2f192d4ba18e81c4fa7ab9588816995d231bafb2bcbca05d43b172830cf36e"
    user = server.requests[0]["body"]["messages"][0]["content"]
    assert user[0] == {"type": "text", "text": "look"}
    assert user[1]["text"].startswith(f"Image sha256:{digest}; request preview 3x3px. Normalized copy")
    assert user[2]["source"]["data"] == base64.b64encode(png(3, 3)).decode()
    [message] = [r for r in logged(tmp_path / "home", "t1") if r["type"] == "user/message"][:1]
    attachment = {"attachmentId": f"sha256:{digest}", "mediaType": "image/png", "width": 3, "height": 3, "bytes": 73}
    assert message["data"]["content"][1] == {"type": "image", "attachment": attachment}


async def test_a_prompt_image_on_a_text_only_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JsonRpcError, match=re.escape('Model "deepseek-v4-flash" does not support image input.')):
        await run(tmp_path, [{"text": "done"}], image_prompt(png(3, 3)), model="deepseek-v4-flash")
    assert not (tmp_path / "home" / "attachments").exists()
