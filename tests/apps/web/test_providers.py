"""Providers from the Settings dialog: a bad request changes no file, and the next start reads what was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel.compose import resolve_rows
from pydsh.kernel.profiles import compose_profile
from tests.apps.web.conftest import JSON, Web
from tests.apps.web.test_bad_input import one_line_error

LOCAL = {"kind": "openai-compatible", "id": "local", "label": "Local", "baseUrl": "http://127.0.0.1:9/v1"}


def files(home: Path) -> dict[str, bytes | None]:
    """The bytes of every file a provider change may write (``None`` when absent)."""
    paths = {"patch": home / "profiles" / "web" / "patch.yml", "credentials": home / "credentials.json"}
    return {name: path.read_bytes() if path.exists() else None for name, path in paths.items()}


def routes(home: Path) -> list[dict[str, Any]]:
    """The ``llm-openai-compat`` routes as the next ``pydsh web`` start composes them."""
    rows = {r.id: r for r in resolve_rows(compose_profile("web", []).rows)}
    return list((rows["llm-openai-compat"].config or {}).get("providers") or [])


@pytest.mark.parametrize(
    "body",
    [
        {**LOCAL, "id": "../../evil"},
        {**LOCAL, "id": "has space"},
        {**LOCAL, "id": ""},
        {**LOCAL, "id": "x" * 65},
        {**LOCAL, "baseUrl": "ftp://example.com"},
        {**LOCAL, "baseUrl": None, "apiKey": "sk-kept-out"},
        {**LOCAL, "models": [{"id": "m", "contextWindow": 0}]},
    ],
    ids=["traversal", "space", "empty", "too-long", "ftp-url", "no-url-with-key", "zero-window"],
)
async def test_a_bad_provider_is_422_and_writes_nothing(web: Web, isolated_home: Path, body: dict[str, Any]) -> None:
    before = files(isolated_home)
    one_line_error(await web.post("/api/providers", body), 422)
    assert files(isolated_home) == before
    assert routes(isolated_home) == []


@pytest.mark.parametrize(
    "raw",
    [
        b'{"kind": "openai-compatible", "id": "a\\ud800b", "baseUrl": "http://127.0.0.1:9/v1"}',
        b'{"kind": "openai-compatible", "id": "ok", "label": "\\udfff", "baseUrl": "http://127.0.0.1:9/v1"}',
        b'{"kind": "openai-compatible", "id": "ok", "label": "\xed\xa0\x80", "baseUrl": "http://127.0.0.1:9/v1"}',
    ],
    ids=["id-escape", "label-escape", "label-utf8-bytes"],
)
async def test_a_lone_surrogate_never_makes_the_patch_file_unreadable(
    web: Web, isolated_home: Path, raw: bytes
) -> None:
    """Text enters as U+FFFD (decision 0017): an id holding one is no route id (422, nothing written); a
    label holding one is stored as U+FFFD, and the next start reads the file back."""
    before = files(isolated_home)
    response = await web.client.post("/api/providers", content=raw, headers=JSON)
    if b'"id": "ok"' in raw:
        assert response.status_code == 201, response.text
        [route] = routes(isolated_home)
        assert route["id"] == "ok" and "\ufffd" in route["name"]
    else:
        one_line_error(response, 422, "invalid_field")
        assert files(isolated_home) == before
        assert routes(isolated_home) == []
    fine = await web.post("/api/providers", LOCAL)
    assert fine.status_code == 201, fine.text
    assert "local" in [r["id"] for r in routes(isolated_home)]


async def test_text_that_looks_like_interpolation_comes_back_literally(web: Web, isolated_home: Path) -> None:
    body = {**LOCAL, "label": "Costs ${env:HOME} and $${x}", "models": [{"id": "m-${cwd}"}]}
    assert (await web.post("/api/providers", body)).status_code == 201
    [route] = routes(isolated_home)
    assert route["name"] == "Costs ${env:HOME} and $${x}"
    assert route["models"] == [{"id": "m-${cwd}"}]


async def test_an_unreadable_patch_file_is_409_and_left_alone(web: Web, isolated_home: Path) -> None:
    patch = isolated_home / "profiles" / "web" / "patch.yml"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text("- {id: broken\n")
    before = files(isolated_home)
    one_line_error(await web.post("/api/providers", {**LOCAL, "apiKey": "sk-not-stored"}), 409, "patch_unreadable")
    assert files(isolated_home) == before


async def test_delete_checks_the_id_too(web: Web, isolated_home: Path) -> None:
    assert (await web.post("/api/providers", LOCAL)).status_code == 201
    before = files(isolated_home)
    one_line_error(await web.delete("/api/providers/bad%20id"), 422, "invalid_field")
    assert files(isolated_home) == before
    assert (await web.delete("/api/providers/local")).status_code == 204
    assert routes(isolated_home) == []
