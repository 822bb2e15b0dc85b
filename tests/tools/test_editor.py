"""str_replace_editor: view, create, str_replace, insert and their exact texts (spec 05 §4.13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import POLICY, Harness, harness, text_of


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    w = tmp_path / "w"
    w.mkdir()
    rows = [("tools", None), ("tool-str-replace-editor", None), ("fs-observation-policy", None), *POLICY]
    world = await harness(w, rows, startup=True)
    yield world
    await world.close()


def ws(h: Harness) -> Path:
    return Path(h.session.header["cwd"])


async def edit(h: Harness, **args: Any) -> str:
    return text_of(await h.call("str_replace_editor", args))


async def test_view_file_and_ranges(h: Harness) -> None:
    f = ws(h) / "a.py"
    f.write_text("one\ntwo\nthree\n")
    assert await edit(h, command="view", path=str(f)) == (
        f"Here's the content of {f} with line numbers (which has a total of 3 lines):\n"
        "     1  one\n     2  two\n     3  three\n"
    )
    assert await edit(h, command="view", path=str(f), view_range=[2, 3]) == (
        f"Here's the content of {f} with line numbers (which has a total of 3 lines) with view_range=[2, 3]:\n"
        "     2  two\n     3  three\n"
    )
    assert (await edit(h, command="view", path=str(f), view_range=[3, -1])).endswith(":\n     3  three\n")
    assert await edit(h, command="view", path=str(f), view_range=None, file_text=None) == await edit(
        h, command="view", path=str(f)
    )
    bad = await edit(h, command="view", path=str(f), view_range=[0, 2])
    assert bad.startswith("Error: Invalid `view_range` parameter: [0, 2].")


async def test_view_directory(h: Harness) -> None:
    w = ws(h)
    for name in ("src/pkg/deep/x.py", "src/main.py", "README.md", ".hidden/h", "node_modules/m/i.js", "__pycache__/c"):
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        (w / name).write_text("")
    assert await edit(h, command="view", path=str(w)) == (
        f"Here're the files and directories up to 2 levels deep in {w}, excluding hidden items, node_modules, and "
        f"Python cache directories:\nf\t{w}/README.md\nd\t{w}/src\nf\t{w}/src/main.py\nd\t{w}/src/pkg\n"
    )
    assert await edit(h, command="view", path=str(w), view_range=[1, 2]) == (
        "Error: The `view_range` parameter is not allowed when `path` points to a directory."
    )


async def test_view_output_is_clipped(h: Harness) -> None:
    f = ws(h) / "big.txt"
    f.write_text("".join(f"{'x' * 90}\n" for _ in range(300)))
    out = await edit(h, command="view", path=str(f))
    assert out.endswith(
        "<response clipped><NOTE>To save on context only part of this file has been shown to you. You should retry "
        "this tool after you have searched inside the file with `grep -n` in order to find the line numbers of "
        "what you are looking for.</NOTE>"
    )
    assert len(out) == 16000 + len(out.split("<response clipped>")[1]) + len("<response clipped>")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"command": "view", "path": "rel/x"},
            "The path rel/x is not an absolute path, it should start with `/`. Maybe you meant /rel/x?",
        ),
        ({"command": "view", "path": "{W}/nope"}, "The path {W}/nope does not exist. Please provide a valid path."),
        ({"command": "create", "path": "{W}/n.txt"}, "Parameter `file_text` is required for command: create"),
        (
            {"command": "create", "path": "{W}/n.txt", "file_text": None},
            "Parameter `file_text` is required for command: create",
        ),
        ({"command": "str_replace", "path": "{W}/e.txt"}, "Parameter `old_str` is required for command: str_replace"),
        (
            {"command": "insert", "path": "{W}/e.txt", "new_str": "x"},
            "Parameter `insert_line` is required for command: insert",
        ),
        (
            {"command": "insert", "path": "{W}/e.txt", "insert_line": 0},
            "Parameter `new_str` is required for command: insert",
        ),
        (
            {"command": "str_replace", "path": "{W}/nope", "old_str": "a"},
            "The path {W}/nope does not exist. Please provide a valid path.",
        ),
        (
            {"command": "delete", "path": "/x"},
            'invalid arguments: "command" must be one of ["view","create","str_replace","insert"]',
        ),
    ],
)
async def test_parameter_errors(h: Harness, args: dict[str, Any], message: str) -> None:
    (ws(h) / "e.txt").write_text("e\n")
    args = {k: v.replace("{W}", str(ws(h))) if isinstance(v, str) else v for k, v in args.items()}
    assert await edit(h, **args) == "Error: " + message.replace("{W}", str(ws(h)))


async def test_create(h: Harness) -> None:
    f = ws(h) / "new" / "file.txt"
    assert await edit(h, command="create", path=str(f), file_text="hello\n") == (
        f"New file created successfully at: {f}"
    )
    assert f.read_text() == "hello\n"
    assert await edit(h, command="create", path=str(f), file_text="again") == (
        f"Error: File already exists at: {f}. Cannot overwrite files using command `create`."
    )


async def test_str_replace(h: Harness) -> None:
    f = ws(h) / "s.py"
    f.write_text("a = 1\nb = 2\na = 1\n")
    unread = await h.call("str_replace_editor", {"command": "str_replace", "path": str(f), "old_str": "b = 2"})
    assert unread.error == {"name": "FsError", "code": "FS_NOT_OBSERVED"}
    await edit(h, command="view", path=str(f))
    assert await edit(h, command="str_replace", path=str(f), old_str="a = 1") == (
        "Error: No replacement was performed. Multiple occurrences of old_str `a = 1` in lines [1, 3]. "
        "Please ensure it is unique"
    )
    assert await edit(h, command="str_replace", path=str(f), old_str="zzz", new_str="y") == (
        f"Error: No replacement was performed, old_str `zzz` did not appear verbatim in {f}."
    )
    assert await edit(h, command="str_replace", path=str(f), old_str="b = 2", new_str="b = 3", insert_line=None) == (
        f"The file {f} has been edited successfully."
    )
    assert await edit(h, command="str_replace", path=str(f), old_str="b = 3\n") == (
        f"The file {f} has been edited successfully."
    )
    assert f.read_text() == "a = 1\na = 1\n"
    assert await edit(h, command="str_replace", path=str(f), old_str="a", new_str=None) == (
        "Error: Parameter `new_str` must be a string or left out for command: str_replace"
    )
    f.write_text("changed behind the tool\n")
    stale = await h.call("str_replace_editor", {"command": "str_replace", "path": str(f), "old_str": "changed"})
    assert text_of(stale) == f'Error: cannot edit "{f}": file changed since it was read — re-read the file, then retry'


async def test_insert(h: Harness) -> None:
    f = ws(h) / "i.txt"
    f.write_text("one\ntwo")
    await edit(h, command="view", path=str(f))
    assert await edit(h, command="insert", path=str(f), insert_line=0, new_str="zero") == (
        f"The file {f} has been edited successfully."
    )
    await edit(h, command="insert", path=str(f), insert_line=3, new_str="three\n")
    await edit(h, command="insert", path=str(f), insert_line=2, new_str="one and a half")
    assert f.read_text() == "zero\none\none and a half\ntwo\nthree\n"
    assert await edit(h, command="insert", path=str(f), insert_line=9, new_str="x") == (
        "Error: Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 5]"
    )


async def test_fence_denial_is_the_bare_marker(h: Harness, tmp_path: Path) -> None:
    outside = Path.home() / ".pydsh-editor-fence-probe.txt"
    outcome = await h.call("str_replace_editor", {"command": "create", "path": str(outside), "file_text": "x"})
    assert text_of(outcome) == "Error: [sandbox: file access denied under workspace-write mode]"
    assert outcome.error == {"name": "FsError", "code": "FS_SANDBOX_DENIED"}
    assert not outside.exists()
