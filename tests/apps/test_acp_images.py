"""Images through ``pydsh acp``: ``promptCapabilities.image`` follows the route of new sessions, and an
``image`` block of ``session/prompt`` is stored and logged by reference like the SDK's, or refused with the
SDK's text on a text-only route."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import acp

from tests.apps.test_acp import bridge, logged, rejected, workspace
from tests.images.images import png

__all__ = ["workspace"]  # the fixture, shared with test_acp

VISION = '["deepseek-official","deepseek-flash"]'


def image_block() -> acp.schema.ImageContentBlock:
    return acp.image_block(base64.b64encode(png(3, 2)).decode(), "image/png")


def advertised(b: object) -> bool:
    """What the bridge answered ``initialize`` with for ``promptCapabilities.image``."""
    answer = next(f for f in b.client.frames if f.get("id") is not None and "result" in f)  # type: ignore[attr-defined]
    return bool(answer["result"]["agentCapabilities"]["promptCapabilities"]["image"])


async def test_a_vision_route_advertises_images_and_logs_a_prompt_image(tmp_path: Path, workspace: Path) -> None:
    async with bridge(
        tmp_path, [{"text": "a red rectangle"}], "--provider", "deepseek-official", "--model", "deepseek-flash"
    ) as b:
        await b.conn.initialize(protocol_version=1)
        assert advertised(b)
        sid = await b.session(workspace)
        prompt = [acp.text_block("what is "), acp.text_block("this?"), image_block(), acp.text_block("thanks")]
        assert (await b.conn.prompt(session_id=sid, prompt=prompt)).stop_reason == "end_turn"
    [content] = [
        e["data"]["content"]
        for e in logged(sid)
        if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"
    ]
    digest = hashlib.sha256(png(3, 2)).hexdigest()
    attachment = {"attachmentId": f"sha256:{digest}", "mediaType": "image/png", "width": 3, "height": 2}
    assert content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "attachment": {**attachment, "bytes": len(png(3, 2))}},
        {"type": "text", "text": "thanks"},
    ]


async def test_a_text_only_route_advertises_no_images_and_refuses_one(tmp_path: Path, workspace: Path) -> None:
    async with bridge(tmp_path, [{"text": "seen"}, {"text": "seen"}]) as b:
        await b.conn.initialize(protocol_version=1)
        assert not advertised(b)
        sid = await b.session(workspace)
        refused = b.conn.prompt(session_id=sid, prompt=[acp.text_block("look"), image_block()])
        assert await rejected(refused) == 'Model "deepseek-v4-flash" does not support image input.'
        await b.conn.set_config_option(config_id="model", session_id=sid, value=VISION)
        switched = await b.conn.prompt(session_id=sid, prompt=[image_block()])
        assert switched.stop_reason == "end_turn"
    sent = [e["data"] for e in logged(sid) if e["type"] == "user/message" and e["data"]["source"]["kind"] == "user"]
    assert [[block["type"] for block in message["content"]] for message in sent] == [["image"]]


async def test_read_image_follows_the_model_the_editor_switched_to(tmp_path: Path, workspace: Path) -> None:
    (workspace / "a.png").write_bytes(png(3, 2))
    call = {"tool_calls": [{"name": "read_image", "arguments": {"file_path": "a.png"}}]}
    async with bridge(tmp_path, [call, {"text": "red"}]) as b:
        sid = await b.session(workspace)
        await b.conn.set_config_option(config_id="model", session_id=sid, value=VISION)
        assert (await b.say(sid, "look at a.png")).stop_reason == "end_turn"
    [result] = [e["data"] for e in logged(sid) if e["type"] == "tool/result"]
    assert "error" not in result
    assert [block["type"] for block in result["message"]["content"]] == ["text", "image"]
