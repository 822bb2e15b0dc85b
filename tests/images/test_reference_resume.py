"""A session pydsh wrote with a prompt image and a ``read_image`` result resumes in the reference runtime,
which finds both images in the shared attachment store and sends them on its next request."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer
from tests.images.images import png
from tests.images.test_offload import budget_patch
from tests.images.test_sdk_images import VISION, calls, image_prompt
from tests.sdk.reference import REFERENCE, needs_reference

pytestmark = needs_reference


def images_of(body: dict[str, Any]) -> list[str]:
    """The base64 data of every image a request carries, in order (tool results included)."""
    found = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            inner = block.get("content") if block.get("type") == "tool_result" else [block]
            found += [b["source"]["data"] for b in inner or [] if isinstance(b, dict) and b.get("type") == "image"]
    return found


async def test_the_reference_resumes_a_pydsh_session_holding_images(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.png").write_bytes(png(4, 3))
    settings = {"dsh_home": str(tmp_path / "home"), "cwd": str(ws), "api_key": "sk-test", "model": VISION}
    script = [{"tool_calls": [{"name": "read_image", "arguments": {"file_path": "a.png"}}]}, {"text": "seen"}]
    async with MockModelServer(sequence=script, repeat_last=True) as server:
        async with AsyncHarness(base_url=server.base_url, **settings) as harness:
            first = await harness.session("t1").run(image_prompt(png(3, 3)))
            assert first.finish_reason == "completed"
        sent = len(server.requests)
        async with AsyncHarness(base_url=server.base_url, dsh_bin=REFERENCE, **settings) as harness:
            resumed = await harness.resume_session("t1")
            again = await resumed.run("and now?")
            assert (again.finish_reason, again.final_response) == ("completed", "seen")
    expected = [base64.b64encode(png(3, 3)).decode(), base64.b64encode(png(4, 3)).decode()]
    assert images_of(server.requests[sent - 1]["body"]) == expected
    assert images_of(server.requests[sent]["body"]) == expected


async def test_the_reference_honours_an_image_offload_pydsh_logged(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, size in (("a.png", 2), ("b.png", 3), ("c.png", 4)):
        (ws / name).write_bytes(png(size, size))
    settings = {"dsh_home": str(tmp_path / "home"), "cwd": str(ws), "api_key": "sk-test", "model": VISION}
    async with MockModelServer(sequence=calls("a.png", "b.png", "c.png"), repeat_last=True) as server:
        async with AsyncHarness(base_url=server.base_url, patches=(budget_patch(tmp_path),), **settings) as harness:
            assert (await harness.session("t1").run("look")).finish_reason == "completed"
        sent = len(server.requests)
        async with AsyncHarness(base_url=server.base_url, dsh_bin=REFERENCE, **settings) as harness:
            again = await (await harness.resume_session("t1")).run("and now?")
            assert again.finish_reason == "completed"
    later = [base64.b64encode(png(n, n)).decode() for n in (3, 4)]
    assert images_of(server.requests[sent - 1]["body"]) == later
    assert images_of(server.requests[sent]["body"]) == later
    placeholder = server.requests[sent]["body"]["messages"][2]["content"][0]["content"][-1]["text"]
    assert placeholder.startswith('[image omitted to fit request image limits; "a.png" (sha256:')
