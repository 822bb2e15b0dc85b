"""Images through the web API: prompt images stored and logged by reference, the refusals of a text-only
route and of oversized images, and ``GET /api/attachments/{id}`` serving a stored copy to the signed-in page."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from tests.apps.web.conftest import Web, open_web
from tests.images.images import png

VISION = [
    {
        "id": "deepseek-official",
        "name": "Scripted",
        "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000, "inputModalities": ["text", "image"]}],
    }
]


def image(data: bytes) -> dict[str, Any]:
    """An inline image block of a prompt body."""
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": "image/png"}


def attachment_id(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


async def user_messages(web: Web, session_id: str) -> list[Any]:
    """The content of every message the user sent that the session logged."""
    await web.idle(session_id)
    text = (await web.client.get(f"/api/sessions/{session_id}/log")).text
    records = [json.loads(line) for line in text.splitlines()[1:]]
    sent = [r["data"] for r in records if r["type"] == "user/message"]
    return [m["content"] for m in sent if (m.get("source") or {}).get("kind") == "user"]


async def test_a_prompt_image_is_stored_logged_by_reference_and_served(isolated_home: Path, tmp_path: Path) -> None:
    async for web in open_web([{"text": "a red square"}], isolated_home, tmp_path, providers=VISION):
        sid = (await web.new_session())["session"]["sessionId"]
        body = {"text": "what is this?", "images": [image(png(3, 2))]}
        response = await web.post(f"/api/sessions/{sid}/prompt", body)
        assert response.status_code == 202, response.text
        [content] = await user_messages(web, sid)
        ref = {"attachmentId": attachment_id(png(3, 2)), "mediaType": "image/png", "width": 3, "height": 2}
        assert content == [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "attachment": {**ref, "bytes": len(png(3, 2))}},
        ]
        served = await web.client.get(f"/api/attachments/{ref['attachmentId']}")
        assert served.status_code == 200
        assert served.content == png(3, 2)
        assert served.headers["content-type"] == "image/png"
        assert served.headers["x-content-type-options"] == "nosniff"


async def test_a_new_session_may_start_with_an_image_and_no_text(isolated_home: Path, tmp_path: Path) -> None:
    async for web in open_web([{"text": "ok"}], isolated_home, tmp_path, providers=VISION):
        body = {"cwd": str(web.workspace), "prompt": {"text": "", "images": [image(png(2, 2))]}}
        response = await web.post("/api/sessions", body)
        assert response.status_code == 201, response.text
        [content] = await user_messages(web, response.json()["session"]["sessionId"])
        assert [block["type"] for block in content] == ["image"]


async def test_a_text_only_route_refuses_an_image_with_the_sdk_text(web: Web, isolated_home: Path) -> None:
    sid = (await web.new_session())["session"]["sessionId"]
    response = await web.post(f"/api/sessions/{sid}/prompt", {"text": "look", "images": [image(png(2, 2))]})
    assert response.status_code == 422
    assert response.json() == {
        "error": {"code": "image_refused", "message": 'Model "deepseek-v4-flash" does not support image input.'}
    }
    assert not (isolated_home / "attachments").exists()


async def test_a_new_session_is_not_created_for_images_its_route_cannot_take(web: Web) -> None:
    body = {"cwd": str(web.workspace), "prompt": {"text": "look", "images": [image(png(2, 2))]}}
    response = await web.post("/api/sessions", body)
    assert response.status_code == 422
    assert response.json()["error"]["message"] == 'Model "deepseek-v4-flash" does not support image input.'
    assert (await web.client.get("/api/sessions")).json()["sessions"] == []


async def test_oversized_and_malformed_images_are_refused_before_queueing(isolated_home: Path, tmp_path: Path) -> None:
    huge = png(2, 2)[:16] + struct.pack(">II", 9000, 10) + png(2, 2)[24:]
    async for web in open_web([{"text": "ok"}], isolated_home, tmp_path, providers=VISION):
        sid = (await web.new_session())["session"]["sessionId"]
        prompt = f"/api/sessions/{sid}/prompt"
        too_big = await web.post(prompt, {"text": "x", "images": [image(huge)]})
        assert (too_big.status_code, too_big.json()["error"]["message"]) == (
            413,
            "Image exceeds the configured dimension limit.",
        )
        bad = await web.post(prompt, {"text": "x", "images": [image(b"not an image")]})
        assert (bad.status_code, bad.json()["error"]["message"]) == (422, "Unsupported or malformed image data.")
        body = {"text": "x", "images": [{"type": "image", "data": "A" * (3 * 1024 * 1024), "mimeType": "image/png"}]}
        assert (await web.post(prompt, body)).status_code == 413
        many = await web.post(prompt, {"text": "x", "images": [image(png(1, 1))] * 21})
        assert many.status_code == 422
        assert await user_messages(web, sid) == []


async def test_attachments_are_served_only_by_id_and_only_when_signed_in(isolated_home: Path, tmp_path: Path) -> None:
    async for web in open_web([{"text": "ok"}], isolated_home, tmp_path, providers=VISION):
        sid = (await web.new_session())["session"]["sessionId"]
        await web.post(f"/api/sessions/{sid}/prompt", {"text": "look", "images": [image(png(2, 2))]})
        good = attachment_id(png(2, 2))
        for bad in ("sha256:" + "0" * 64, "sha256:..%2F..%2Fsessions", "..%2F..%2Fsettings.json", good.upper()):
            assert (await web.client.get(f"/api/attachments/{bad}")).status_code == 404, bad
        web.client.cookies.clear()
        assert (await web.client.get(f"/api/attachments/{good}")).status_code == 401
