"""Image offload: the oldest images leave requests for good, by one logged ``image/offload`` decision, once
the retained ones exceed the route's budget; later requests (and a resumed session) show a placeholder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pydsh.images.offload import Budget, base64_length, excess
from pydsh.sdk.client import AsyncHarness
from pydsh.session.events import payload_problem
from pydsh.testing.mock_model_server import MockModelServer
from tests.images.images import logged, png
from tests.images.test_sdk_images import calls, settings


@pytest.mark.parametrize(
    ("lengths", "budget", "expected"),
    [
        ([10, 10], Budget(max_images=2, max_bytes=100, count_quantum=1, byte_quantum=1), 0),
        ([10, 10, 10], Budget(max_images=2, max_bytes=100, count_quantum=1, byte_quantum=1), 1),
        ([10, 10, 10], Budget(max_images=2, max_bytes=100, count_quantum=2, byte_quantum=1), 2),
        ([40, 40, 40], Budget(max_images=9, max_bytes=100, count_quantum=1, byte_quantum=1), 1),
        ([40, 40, 40], Budget(max_images=9, max_bytes=100, count_quantum=1, byte_quantum=30), 1),
        ([40, 40, 40], Budget(max_images=9, max_bytes=100, count_quantum=1, byte_quantum=50), 2),
    ],
)
def test_excess_removes_the_oldest_in_whole_quanta(lengths: list[int], budget: Budget, expected: int) -> None:
    assert excess(lengths, budget) == expected


def test_base64_length_rounds_up_to_whole_quads() -> None:
    assert [base64_length(n) for n in (0, 1, 3, 4, 73)] == [0, 4, 4, 8, 100]


def test_the_record_shape_is_checked_as_the_reference_checks_it() -> None:
    assert payload_problem("image/offload", {"targets": [{"seq": 4, "imageIndexes": [0, 2]}]}) is None
    assert payload_problem("image/offload", {"targets": []}) == "data must contain a nonempty targets array"
    unordered = {"targets": [{"seq": 4, "imageIndexes": [2, 1]}]}
    assert payload_problem("image/offload", unordered) == "imageIndexes must be strictly increasing"
    missing = {"targets": [{"seq": 4}]}
    assert payload_problem("image/offload", missing) == "each target must contain a seq and nonempty imageIndexes"


def budget_patch(tmp_path: Path) -> Path:
    """Two images per request, removed one at a time."""
    config = {"maxImagesPerRequest": 2, "imageOffloadCountQuantum": 1}
    path = tmp_path / "budget.yml"
    path.write_text(yaml.safe_dump([{"id": "attachment-local", "config": config}]))
    return path


def tool_images(request: dict[str, Any]) -> list[str]:
    """Per tool result of one request body: ``image`` when it carries the image, else its last text."""
    out = []
    for message in request["body"]["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "tool_result":
                last = part["content"][-1]
                out.append("image" if last["type"] == "image" else last["text"])
    return out


async def test_the_oldest_image_is_offloaded_once_a_request_holds_too_many(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, size in (("a.png", 2), ("b.png", 3), ("c.png", 4)):
        (ws / name).write_bytes(png(size, size))
    async with (
        MockModelServer(sequence=calls("a.png", "b.png", "c.png"), repeat_last=True) as server,
        AsyncHarness(base_url=server.base_url, patches=(budget_patch(tmp_path),), **settings(tmp_path)) as harness,
    ):
        session = harness.session("t1")
        await session.run("look")
        await session.run("again")
    seen = [tool_images(r) for r in server.requests]
    assert seen[:3] == [[], ["image"], ["image", "image"]]
    placeholder, *rest = seen[3]
    assert rest == ["image", "image"]
    store = tmp_path / "home" / "attachments" / "v1" / "objects"
    digest = "sha256:" + hashlib.sha256(png(2, 2)).hexdigest()
    assert placeholder.startswith(f'[image omitted to fit request image limits; "a.png" ({digest}). Normalized copy')
    assert json.dumps(str(store / digest[7:9] / digest[7:])) in placeholder
    records = logged(tmp_path / "home", "t1")
    [offload] = [r for r in records if r["type"] == "image/offload"]
    [first_result] = [r for r in records if r["type"] == "tool/result"][:1]
    assert offload["data"] == {"targets": [{"seq": first_result["seq"], "imageIndexes": [0]}]}
    assert seen[4] == seen[3], "the decision holds for every later request, logging nothing more"
