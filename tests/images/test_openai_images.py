"""Images on an OpenAI-compatible route: a prompt image reaches the loopback chat-completions server as an
``image_url`` part holding a ``data:`` URL, after the text handle naming the stored copy."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import yaml

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer
from tests.images.images import png
from tests.images.test_sdk_images import image_prompt, settings


def route_patch(tmp_path: Path, base_url: str) -> Path:
    """An OpenAI-compatible route whose one model declares image input."""
    provider = {
        "id": "local",
        "baseURL": base_url + "/v1",
        "models": [{"id": "vision", "inputModalities": ["text", "image"]}],
    }
    path = tmp_path / "route.yml"
    path.write_text(yaml.safe_dump([{"id": "llm-openai-compat", "config": {"providers": [provider]}}]))
    return path


async def test_a_prompt_image_is_an_image_url_data_part(tmp_path: Path) -> None:
    async with MockModelServer(sequence=[{"text": "red"}], repeat_last=True) as server:
        options = {**settings(tmp_path), "model": "vision", "provider": "local"}
        patches = (route_patch(tmp_path, server.base_url),)
        async with AsyncHarness(base_url=server.base_url, patches=patches, **options) as harness:
            await harness.session("t1").run(image_prompt(png(3, 3)))
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    [user] = [m for m in request["body"]["messages"] if m["role"] == "user" and isinstance(m["content"], list)]
    digest = hashlib.sha256(png(3, 3)).hexdigest()
    text, handle, image = user["content"]
    assert text == {"type": "text", "text": "look"}
    assert handle["type"] == "text"
    assert handle["text"].startswith(f"Image sha256:{digest}; request preview 3x3px. Normalized copy")
    url = "data:image/png;base64," + base64.b64encode(png(3, 3)).decode()
    assert image == {"type": "image_url", "image_url": {"url": url}}
