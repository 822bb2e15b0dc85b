"""F6: "Add workspace" → Browse… opens a folder browser; the folder chosen by keyboard becomes a workspace."""

from __future__ import annotations

from tests.apps.web.browser.harness import screenshot, wait_for
from tests.apps.web.browser.test_a11y import serious


def test_the_directory_browser_adds_the_chosen_folder(web, browse, tmp_path):
    home = tmp_path / "user"
    (home / "projects" / "alpha").mkdir(parents=True)
    (home / "projects" / "beta").mkdir()
    (home / ".hidden").mkdir()
    (home / "notes.txt").write_text("not a folder\n")
    server = web([], env={"HOME": str(home)})
    page = browse(server).page
    page.get_by_role("button", name="Add workspace").click()
    page.get_by_role("button", name="Browse…").click()
    dialog = page.locator("dialog.dir-dialog")
    dialog.wait_for()
    entries = dialog.locator(".dir-entry")
    wait_for(lambda: entries.all_inner_texts() == ["projects"], message="home folders")
    assert dialog.locator(".dir-path").inner_text() == str(home)
    assert dialog.get_by_role("button", name="Up to the parent folder").is_disabled()
    assert entries.first.evaluate("e => e === document.activeElement")
    page.keyboard.press("Enter")
    wait_for(lambda: entries.all_inner_texts() == ["alpha", "beta"], message="project folders")
    assert dialog.locator(".dir-roots button").all_inner_texts() == ["Home", "work"]
    screenshot(page, "directory-browser")
    assert not serious(page, "directory browser")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    wait_for(lambda: dialog.locator(".dir-path").inner_text() == str(home / "projects" / "beta"), message="beta")
    assert dialog.get_by_text("No folders here.").is_visible()
    dialog.get_by_role("button", name="Add this folder").click()
    row = page.locator(".workspace .ws-name", has_text="beta")
    row.wait_for()
    assert row.get_attribute("title") == str(home / "projects" / "beta")
    with server.client() as c:
        paths = [w["path"] for w in c.get("/api/known-workspaces").json()["workspaces"]]
    assert str(home / "projects" / "beta") in paths


def test_escape_closes_the_browser_and_keeps_the_typed_path(web, browse, tmp_path):
    home = tmp_path / "user"
    (home / "projects").mkdir(parents=True)
    server = web([], env={"HOME": str(home)})
    page = browse(server).page
    page.get_by_role("button", name="Add workspace").click()
    page.get_by_label("Workspace path").fill("~/projects")
    page.get_by_role("button", name="Browse…").click()
    dialog = page.locator("dialog.dir-dialog")
    wait_for(lambda: dialog.locator(".dir-entry").all_inner_texts() == ["projects"], message="home folders")
    page.keyboard.press("Escape")
    dialog.wait_for(state="detached")
    assert page.get_by_role("button", name="Browse…").evaluate("e => e === document.activeElement")
    assert page.get_by_label("Workspace path").input_value() == "~/projects"
    with server.client() as c:
        refused = c.get("/api/directories", params={"path": "/etc"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "outside_roots"
