"""read, write and edit through the real pipeline: result texts, error texts, observations."""

from __future__ import annotations

import os
import random
import stat
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.contract.tools import ToolOutcome
from pydsh.tools import files
from pydsh.tools.fs import LineWindow, split_lines
from tests.tools.harness import FS, POLICY, Harness, harness, text_of


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, FS + POLICY, startup=True)
    yield world
    await world.close()


def error_of(outcome: ToolOutcome) -> tuple[str, str | None]:
    assert outcome.is_error
    return text_of(outcome), (outcome.error or {}).get("code")


def block(path: Path, body: str) -> str:
    return f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n</content>"


# -- read ------------------------------------------------------------------------------------


async def test_read_happy_path_and_meta(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("name,count\napples,12\n")
    outcome = await h.call("read", {"file_path": "t.csv"})
    assert text_of(outcome) == block(tmp_path / "t.csv", "1: name,count\n2: apples,12\n\n(End of file - total 2 lines)")
    assert outcome.meta == {
        "path": str(tmp_path / "t.csv"),
        "offset": 1,
        "lines": [{"number": 1, "text": "name,count"}, {"number": 2, "text": "apples,12"}],
        "totalLines": 2,
        "lang": "csv",
    }
    assert h.tools.execution_mode(h.exec("read", {"file_path": "t.csv"})) == "parallel"


async def test_read_windows_of_a_long_file(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 2501)))
    window = await h.text("read", {"file_path": "long.txt", "offset": 2490, "limit": 5})
    lines = "\n".join(f"{i}: line {i}" for i in range(2490, 2495))
    footer = "(Showing lines 2490-2494 of 2500. Use offset=2495 to continue.)"
    assert window == block(tmp_path / "long.txt", f"{lines}\n\n{footer}")
    default = await h.text("read", {"file_path": str(tmp_path / "long.txt")})
    assert default.endswith(
        "2000: line 2000\n\n(Showing lines 1-2000 of 2500. Use offset=2001 to continue.)\n</content>"
    )
    tail = await h.text("read", {"file_path": "long.txt", "offset": 2500})
    assert tail == block(tmp_path / "long.txt", "2500: line 2500\n\n(End of file - total 2500 lines)")


async def test_read_caps_long_lines_and_bytes(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "wide.txt").write_text("x" * 2500 + "\r\nshort\r\n")
    wide = await h.text("read", {"file_path": "wide.txt"})
    assert f"1: {'x' * 2000}... (line truncated to 2000 chars)\n2: short\n" in wide
    (tmp_path / "big.txt").write_text("".join("y" * 99 + "\n" for _ in range(1000)))
    capped = await h.text("read", {"file_path": "big.txt"})
    assert "(Output capped. Showing lines 1-512. Use offset=513 to continue.)" in capped


async def test_read_empty_file(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    assert await h.text("read", {"file_path": "empty.txt", "offset": 1}) == block(
        tmp_path / "empty.txt", "(End of file - total 0 lines)"
    )


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ({"file_path": "e.txt", "offset": 0}, "offset must be a positive integer", None),
        ({"file_path": "e.txt", "offset": 1.5}, "offset must be a positive integer", None),
        ({"file_path": "e.txt", "limit": 2001}, "limit must be less than or equal to 2000", None),
        ({"file_path": "e.txt", "limit": "abc"}, 'invalid arguments: "limit" must be a number', "INVALID_ARGS"),
        ({}, 'invalid arguments: missing required property "file_path"', "INVALID_ARGS"),
        ({"file_path": "e.txt", "offset": 10}, 'offset 10 is out of range for "{W}/e.txt" (4 lines)', "FS_NOT_FOUND"),
        ({"file_path": "missing.txt"}, 'cannot read "{W}/missing.txt": not found', "FS_NOT_FOUND"),
        ({"file_path": "sub"}, 'cannot read "{W}/sub": not a regular file', "FS_NOT_REGULAR_FILE"),
        ({"file_path": "nul.bin"}, 'cannot read "{W}/nul.bin": binary file', "FS_NOT_TEXT"),
        ({"file_path": "latin1.txt"}, 'cannot read "{W}/latin1.txt": binary file', "FS_NOT_TEXT"),
    ],
)
async def test_read_errors(h: Harness, tmp_path: Path, args: dict[str, Any], message: str, code: str | None) -> None:
    (tmp_path / "e.txt").write_text("a\nb\nc\nd\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "nul.bin").write_bytes(b"abc\0def")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    outcome = await h.call("read", args)
    assert error_of(outcome) == ("Error: " + message.replace("{W}", str(tmp_path)), code)


def reference_window(content: str, offset: int, limit: int) -> tuple[list[tuple[int, str]], int, bool]:
    """The whole-file algorithm of spec 05 §4.1, for comparing the streaming window against."""
    lines = split_lines(content)
    selected: list[tuple[int, str]] = []
    size = 0
    for number in range(offset, min(len(lines), offset + limit - 1) + 1):
        line = lines[number - 1]
        if len(line) > 2000:
            line = line[:2000] + "... (line truncated to 2000 chars)"
        cost = len(line.encode("utf-8")) + (1 if selected else 0)
        if size + cost > 51200:
            return selected, len(lines), True
        size += cost
        selected.append((number, line))
    return selected, len(lines), False


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_streamed_window_matches_the_whole_file_reading(chunk: int) -> None:
    rng = random.Random(chunk)
    pieces = ["a", "é", "😀", "\r", "\n", "\n", "x" * 1999, "y" * 2003, "€" * 2001, "z" * 30000]
    for _ in range(60):
        content = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        data = content.encode("utf-8")
        offset, limit = rng.randint(1, 4), rng.randint(1, 5)
        window = LineWindow(offset, limit)
        for start in range(0, len(data), chunk):
            assert window.feed(data[start : start + chunk])
        window.finish()
        got = [(entry["number"], entry["text"]) for entry in window.selected]
        assert (got, window.total, window.capped) == reference_window(content, offset, limit), repr(content)


async def test_read_memory_is_bounded_by_the_window(h: Harness, tmp_path: Path) -> None:
    with (tmp_path / "big.txt").open("wb") as f:
        f.write(b"0123456789abcdef\n" * (2 * 1024 * 1024))
    tracemalloc.start()
    try:
        text = await h.text("read", {"file_path": "big.txt", "offset": 5, "limit": 2})
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    footer = "(Showing lines 5-6 of 2097152. Use offset=7 to continue.)"
    assert text.endswith(f"5: 0123456789abcdef\n6: 0123456789abcdef\n\n{footer}\n</content>")
    assert peak < 8 * 1024 * 1024


# -- write and observations ------------------------------------------------------------------


async def test_new_file_needs_no_read(h: Harness, tmp_path: Path) -> None:
    outcome = await h.call("write", {"file_path": "deep/new.txt", "content": "hello"})
    target = tmp_path / "deep" / "new.txt"
    assert text_of(outcome) == block(target, "Created file")
    assert target.read_text() == "hello"
    assert outcome.meta == {
        "operation": "create",
        "path": str(target),
        "diffs": [{"path": str(target), "oldText": None, "newText": "hello"}],
    }
    again = await h.call("write", {"file_path": "deep/new.txt", "content": "second"})
    assert text_of(again) == block(target, "Updated file")
    assert again.meta["diffs"][0]["oldText"] == "hello"


async def test_unread_existing_file_is_not_overwritten(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("original")
    outcome = await h.call("write", {"file_path": "keep.txt", "content": "clobber"})
    assert error_of(outcome) == (
        f'Error: cannot modify "{target}": file has not been read — read the file, then retry',
        "FS_NOT_OBSERVED",
    )
    assert target.read_text() == "original"


async def test_read_then_write_updates(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("v1")
    await h.call("read", {"file_path": "f.txt"})
    assert text_of(await h.call("write", {"file_path": "f.txt", "content": "v2"})) == block(target, "Updated file")
    assert target.read_text() == "v2"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


async def test_changed_since_read_is_stale(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("v1\n")
    await h.call("read", {"file_path": "f.txt"})
    target.write_text("changed elsewhere\n")
    write = await h.call("write", {"file_path": "f.txt", "content": "mine"})
    assert error_of(write) == (
        f'Error: cannot write "{target}": file changed since it was read — re-read the file, then retry',
        "FS_STALE_VERSION",
    )
    edit = await h.call("edit", {"file_path": "f.txt", "old_string": "changed", "new_string": "x"})
    assert error_of(edit) == (
        f'Error: cannot edit "{target}": file changed since it was read — re-read the file, then retry',
        "FS_STALE_VERSION",
    )
    assert target.read_text() == "changed elsewhere\n"


async def test_observed_absent_then_created_elsewhere(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "late.txt"
    await h.call("read", {"file_path": "late.txt"})
    edit = await h.call("edit", {"file_path": "late.txt", "old_string": "a", "new_string": "b"})
    assert error_of(edit) == (f'Error: cannot edit "{target}": not found', "FS_NOT_FOUND")
    target.write_text("appeared")
    write = await h.call("write", {"file_path": "late.txt", "content": "x"})
    assert error_of(write)[1] == "FS_NOT_OBSERVED"


async def test_write_to_a_directory(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    outcome = await h.call("write", {"file_path": "d", "content": "x"})
    assert error_of(outcome) == (f'Error: cannot write "{tmp_path / "d"}": not a regular file', "FS_NOT_REGULAR_FILE")


async def test_own_writes_count_as_observed(h: Harness, tmp_path: Path) -> None:
    await h.call("write", {"file_path": "mine.txt", "content": "a a"})
    outcome = await h.call("edit", {"file_path": "mine.txt", "old_string": "a a", "new_string": "b"})
    assert not outcome.is_error
    assert (tmp_path / "mine.txt").read_text() == "b"


async def test_existing_permissions_are_kept(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("echo 1\n")
    target.chmod(0o755)
    await h.call("read", {"file_path": "run.sh"})
    await h.call("write", {"file_path": "run.sh", "content": "echo 2\n"})
    assert target.stat().st_mode & 0o777 == 0o755


async def test_writes_are_durable(h: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        steps.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(*args: Any, **kwargs: Any) -> None:
        steps.append("replace")
        real_replace(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    assert not (await h.call("write", {"file_path": "d.txt", "content": "x"})).is_error
    assert steps[-3:] == ["fsync-file", "replace", "fsync-dir"]


async def test_a_failed_recheck_leaves_the_file_and_no_temp_file(
    h: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kept.txt").write_text("old\n")
    await h.call("read", {"file_path": "kept.txt"})
    monkeypatch.setattr(files, "version_at", lambda dir_fd, name: None)
    outcome = await h.call("write", {"file_path": "kept.txt", "content": "new\n"})
    assert error_of(outcome)[1] == "FS_STALE_VERSION"
    assert (tmp_path / "kept.txt").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt"]


async def test_writes_never_flip_the_umask(h: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    umask = os.umask(0o027)
    os.umask(umask)

    def flip(mask: int) -> int:
        raise AssertionError("the umask was changed while a file tool ran")

    monkeypatch.setattr(files, "_UMASK", None, raising=False)
    monkeypatch.setattr(os, "umask", flip)
    assert not (await h.call("write", {"file_path": "new.txt", "content": "x"})).is_error
    assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


# -- edit ------------------------------------------------------------------------------------


async def test_edit_unique_replace_all_and_not_found(h: Harness, tmp_path: Path) -> None:
    target = tmp_path / "code.py"
    target.write_text("a = 1\nb = 1\n")
    await h.call("read", {"file_path": "code.py"})
    ambiguous = await h.call("edit", {"file_path": "code.py", "old_string": "= 1", "new_string": "= 2"})
    assert error_of(ambiguous) == (
        f'Error: old_string matched 2 times in "{target}"; '
        "provide a more specific old_string or set replace_all to true",
        "FS_AMBIGUOUS_EDIT",
    )
    missing = await h.call("edit", {"file_path": "code.py", "old_string": "zzz", "new_string": ""})
    assert error_of(missing) == (f'Error: old_string was not found in "{target}"', "FS_EDIT_NOT_FOUND")
    unique = await h.call("edit", {"file_path": "code.py", "old_string": "a = 1", "new_string": "a = 3"})
    assert text_of(unique) == f"The file {target} has been updated successfully."
    assert unique.meta == {
        "operation": "update",
        "path": str(target),
        "diffs": [{"path": str(target), "oldText": "a = 1\nb = 1\n", "newText": "a = 3\nb = 1\n"}],
    }
    every = await h.call("edit", {"file_path": "code.py", "old_string": "= ", "new_string": ":= ", "replace_all": True})
    assert text_of(every) == f"The file {target} has been updated. All occurrences were successfully replaced."
    assert target.read_text() == "a := 3\nb := 1\n"


async def test_edit_errors(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    (tmp_path / "bin.dat").write_bytes(b"\0\1")
    empty = await h.call("edit", {"file_path": "x.txt", "old_string": "", "new_string": "y"})
    assert error_of(empty) == ("Error: old_string must be a non-empty string", None)
    unread = await h.call("edit", {"file_path": "x.txt", "old_string": "x", "new_string": "y"})
    assert error_of(unread)[1] == "FS_NOT_OBSERVED"
    never = await h.call("edit", {"file_path": "nope.txt", "old_string": "x", "new_string": "y"})
    assert error_of(never)[1] == "FS_NOT_OBSERVED"
    await h.call("read", {"file_path": "bin.dat"})
    binary = await h.call("edit", {"file_path": "bin.dat", "old_string": "a", "new_string": "b"})
    assert error_of(binary) == (f'Error: cannot edit "{tmp_path / "bin.dat"}": binary file', "FS_NOT_TEXT")


async def test_paths_follow_the_working_directory(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "in.txt").write_text("inside\n")
    h.kernel.ctx.require(WORKING_DIRECTORY).change(h.agent, "sub")
    assert "1: inside" in await h.text("read", {"file_path": "in.txt"})


async def test_without_observation_policy_writes_need_no_read(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("tool-fs", None)])
    try:
        (tmp_path / "f.txt").write_text("old")
        assert not (await world.call("write", {"file_path": "f.txt", "content": "new"})).is_error
        assert (tmp_path / "f.txt").read_text() == "new"
        schema = next(s for s in world.tools.schemas(None) if s["name"] == "write")
        assert list(schema["parameters"]["properties"]) == ["file_path", "content"]
        sent = await world.call("write", {"file_path": "f.txt", "content": "x", "sandbox_permissions": "read-only"})
        assert text_of(sent) == (
            "Error: sandbox_permissions is not available in this composition (no sandboxing filesystem to escalate)"
        )
    finally:
        await world.close()


async def test_config_disables_tools(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("tool-fs", {"write": False, "edit": False})])
    try:
        assert [s["name"] for s in world.tools.schemas(None)] == ["read"]
    finally:
        await world.close()


async def test_modified_by_bash_after_the_read_is_stale(tmp_path: Path) -> None:
    rows = [*FS, ("tool-bash", None), *POLICY[:2], ("permission", {"mode": "danger-full-access"})]
    world = await harness(tmp_path, rows, startup=True)
    try:
        (tmp_path / "s.txt").write_text("one\n")
        await world.call("read", {"file_path": "s.txt"})
        await world.call("bash", {"description": "Append a line", "command": "echo two >> s.txt"})
        write = await world.call("write", {"file_path": "s.txt", "content": "mine"})
        edit = await world.call("edit", {"file_path": "s.txt", "old_string": "one", "new_string": "1"})
        assert error_of(write)[1] == error_of(edit)[1] == "FS_STALE_VERSION"
        assert (tmp_path / "s.txt").read_text() == "one\ntwo\n"
    finally:
        await world.close()
