"""The directory browser of "Add workspace" (spec 12 F6) and ``@file`` completion (F29): what they list, and the
one-line 4xx for every path they must refuse."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.apps.web.conftest import Web
from tests.apps.web.test_bad_input import one_line_error


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder with projects, a hidden folder, a file and a symlink that leads out of it."""
    root = tmp_path / "user"
    (root / "projects" / "alpha").mkdir(parents=True)
    (root / "projects" / "Beta").mkdir()
    (root / ".secret").mkdir()
    (root / "notes.txt").write_text("notes\n")
    (root / "escape").symlink_to("/etc")
    (root / "inside").symlink_to(root / "projects")
    monkeypatch.setenv("HOME", str(root))
    return root


def names(body: dict[str, Any]) -> list[str]:
    return [d["name"] for d in body["directories"]]


async def test_the_browser_lists_folders_only_and_navigates(web: Web, home: Path) -> None:
    top = (await web.client.get("/api/directories")).json()
    assert top["path"] == str(home) and top["parent"] is None
    assert names(top) == ["inside", "projects"]
    projects = (await web.client.get("/api/directories", params={"path": "~/projects"})).json()
    assert names(projects) == ["alpha", "Beta"]
    assert projects["parent"] == str(home)
    assert projects["directories"][0]["path"] == str(home / "projects" / "alpha")
    workspace = (await web.client.get("/api/directories", params={"path": str(web.workspace)})).json()
    assert workspace["path"] == str(web.workspace) and workspace["parent"] is None
    assert str(web.workspace) in workspace["roots"]


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("~/../..", 403, "outside_roots"),
        ("/etc", 403, "outside_roots"),
        ("~/escape", 403, "outside_roots"),
        ("~/projects/../../..", 403, "outside_roots"),
        ("~/missing", 404, "not_found"),
        ("~/notes.txt", 422, "not_a_directory"),
        ("projects", 422, "invalid_path"),
        ("~/bad\x00name", 422, "invalid_path"),
        ("~/line\nbreak", 422, "invalid_path"),
        ("~/\ud800", 422, "invalid_path"),
        ("/" + "a" * 5000, 422, "invalid_path"),
        ("~/" + "b" * 300, 422, "invalid_path"),
    ],
)
async def test_the_browser_refuses_with_one_line(web: Web, home: Path, path: str, status: int, code: str) -> None:
    query = quote(path.encode("utf-8", "surrogatepass"), safe="")
    response = await web.client.get(f"/api/directories?path={query}")
    one_line_error(response, status, code)
    assert "/etc" not in response.text or path == "/etc"


async def test_file_completion_finds_workspace_relative_paths(web: Web) -> None:
    (web.workspace / "src" / "pkg").mkdir(parents=True)
    (web.workspace / "src" / "pkg" / "hello_world.py").write_text("print('hi')\n")
    (web.workspace / ".git").mkdir()
    (web.workspace / ".git" / "hello").write_text("x\n")
    (web.workspace / "node_modules").mkdir()
    (web.workspace / "node_modules" / "hello.js").write_text("x\n")
    (web.workspace / "link").symlink_to("/etc", target_is_directory=True)
    wid = (await web.client.get("/api/known-workspaces")).json()["workspaces"][0]["workspaceId"]
    found = (await web.client.get(f"/api/known-workspaces/{wid}/files", params={"q": "HELLO"})).json()
    assert found == {"files": ["hello.txt", "src/pkg/hello_world.py"], "truncated": False}
    everything = (await web.client.get(f"/api/known-workspaces/{wid}/files")).json()["files"]
    assert not any(f.startswith(("link/", ".git/", "node_modules/")) for f in everything)
    odd = await web.client.get(f"/api/known-workspaces/{wid}/files?q=%ED%A0%80hello")
    assert odd.json() == {"files": [], "truncated": False}
    one_line_error(
        await web.client.get(f"/api/known-workspaces/{wid}/files", params={"q": "q" * 201}), 422, "invalid_query"
    )
    one_line_error(await web.client.get("/api/known-workspaces/nope/files"), 404, "not_found")
    one_line_error(await web.client.get(f"/api/known-workspaces/{os.pardir}/files"), 404)
