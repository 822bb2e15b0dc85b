"""glob and grep with ripgrep on PATH and with the pure-Python fallback: same texts either way."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.keys import SYSTEM_PROMPT
from tests.tools.harness import Harness, harness, text_of

SPILL = re.compile(r"stored at: (\S+)\. Use read with offset/limit, or grep this path to search within it\.\)$")


@pytest.fixture(params=["rg", "python"])
async def h(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "rg" and shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed on this host")
    if request.param == "python":
        monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    work = tmp_path / "w"
    work.mkdir()
    world = await harness(work, [("tools", None), ("tool-fs", None), ("tool-fs-search", None)])
    yield world
    await world.close()


def workspace(h: Harness) -> Path:
    return Path(h.session.header["cwd"])


def touch(path: Path, text: str = "", mtime: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))


# -- glob ------------------------------------------------------------------------------------


async def test_glob_caps_at_100_and_spills_the_sorted_list(h: Harness) -> None:
    w = workspace(h)
    base = 1_700_000_000_000_000_000
    for i in range(150):
        touch(w / "many" / f"f{i:03}.txt", mtime=base + (150 - i) * 1000)
    touch(w / "old.txt", mtime=base)
    out = await h.text("glob", {"pattern": "*.txt"})
    lines = out.split("\n")
    assert lines[0] == "old.txt"
    assert lines[1] == "many/f149.txt"
    assert lines[99] == "many/f051.txt"
    assert lines[100] == ""
    assert lines[101].startswith("(Showing 100 of 151 paths. Full sorted result stored at: ")
    match = SPILL.search(lines[101])
    assert match is not None
    stored = Path(match.group(1)).read_text().split("\n")
    assert stored[:100] == lines[:100]
    assert len(stored) == 151
    assert stored[-1] == "many/f000.txt"
    assert oct(Path(match.group(1)).stat().st_mode & 0o777) == "0o600"


async def test_glob_semantics(h: Harness) -> None:
    w = workspace(h)
    touch(w / "a.py", mtime=1)
    touch(w / "src" / "b.py", mtime=2)
    touch(w / "src" / "deep" / "c.py", mtime=3)
    touch(w / ".hidden" / "d.py", mtime=4)
    touch(w / "ignored" / "e.py", mtime=5)
    touch(w / ".git" / "f.py", mtime=6)
    touch(w / ".gitignore", "ignored/\n", mtime=7)
    (w / "dir.py").mkdir()
    assert await h.text("glob", {"pattern": "*.py"}) == "a.py\nsrc/b.py\nsrc/deep/c.py\n.hidden/d.py\nignored/e.py"
    assert await h.text("glob", {"pattern": "src/*.py"}) == "src/b.py"
    assert await h.text("glob", {"pattern": "src/**/*.py"}) == "src/b.py\nsrc/deep/c.py"
    assert await h.text("glob", {"pattern": "{a,c}.py"}) == "a.py\nsrc/deep/c.py"
    assert await h.text("glob", {"pattern": "*.py", "path": "src"}) == "src/b.py\nsrc/deep/c.py"
    assert await h.text("glob", {"pattern": "*.rs"}) == "No files found"


async def test_glob_outside_the_working_directory_is_absolute(h: Harness, tmp_path: Path) -> None:
    touch(tmp_path / "elsewhere" / "x.md")
    assert await h.text("glob", {"pattern": "*.md", "path": str(tmp_path / "elsewhere")}) == str(
        tmp_path / "elsewhere" / "x.md"
    )


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        ({"pattern": ""}, "pattern must be a non-empty string", None),
        ({"pattern": "*", "path": ""}, "path must be a non-empty string when given", None),
        ({"pattern": "*", "path": "nope"}, 'cannot read "{W}/nope": not found', "FS_NOT_FOUND"),
    ],
)
async def test_glob_errors(h: Harness, args: dict[str, Any], message: str, code: str | None) -> None:
    outcome = await h.call("glob", args)
    assert text_of(outcome) == "Error: " + message.replace("{W}", str(workspace(h)))
    assert (outcome.error or {}).get("code") == code


# -- grep ------------------------------------------------------------------------------------


async def test_grep_groups_lines_by_file(h: Harness) -> None:
    w = workspace(h)
    touch(w / "a.txt", "alpha\nbeta needle\ngamma needle\n")
    touch(w / "sub" / "b.txt", "needle at start\n")
    touch(w / "c.txt", "nothing here\n")
    out = await h.text("grep", {"pattern": "needle"})
    assert out == (
        "Found 3 matches\n\na.txt\nLine 2: beta needle\nLine 3: gamma needle\n\nsub/b.txt\nLine 1: needle at start"
    )
    assert (
        await h.text("grep", {"pattern": "needle", "path": "sub"})
        == "Found 1 match\n\nsub/b.txt\nLine 1: needle at start"
    )
    assert await h.text("grep", {"pattern": "absent"}) == "No matches found"
    one_file = await h.text("grep", {"pattern": "gamma", "path": "a.txt"})
    assert one_file == "Found 1 match\n\na.txt\nLine 3: gamma needle"


async def test_grep_default_filters_and_include(h: Harness) -> None:
    w = workspace(h)
    (w / ".git").mkdir()
    touch(w / ".gitignore", "build/\n*.log\n")
    touch(w / "keep.py", "hit\n")
    touch(w / "notes.md", "hit\n")
    touch(w / ".hidden.py", "hit\n")
    touch(w / "build" / "out.py", "hit\n")
    touch(w / "debug.log", "hit\n")
    (w / "blob.bin").write_bytes(b"hit\0binary\n")
    assert (
        await h.text("grep", {"pattern": "hit"}) == "Found 2 matches\n\nkeep.py\nLine 1: hit\n\nnotes.md\nLine 1: hit"
    )
    assert await h.text("grep", {"pattern": "hit", "include": "*.py"}) == (
        "Found 2 matches\n\n.hidden.py\nLine 1: hit\n\nkeep.py\nLine 1: hit"
    )


async def test_grep_long_and_invalid_lines(h: Harness) -> None:
    w = workspace(h)
    (w / "long.txt").write_bytes(b"key " + "é".encode() * 1500 + b"\n")
    (w / "latin.txt").write_bytes(b"key caf\xe9\n")
    out = await h.text("grep", {"pattern": "key"})
    long_line = "key " + "é" * 998 + " (line truncated)"
    assert out == f"Found 2 matches\n\nlatin.txt\nLine 1: (line is not valid UTF-8)\n\nlong.txt\nLine 1: {long_line}"


async def test_grep_caps_at_250_and_spills(h: Harness) -> None:
    w = workspace(h)
    touch(w / "a.txt", "".join(f"hit {i}\n" for i in range(200)))
    touch(w / "b.txt", "".join(f"hit {i}\n" for i in range(100)))
    out = await h.text("grep", {"pattern": "hit"})
    head, footer = out.rsplit("\n\n", 1)
    assert head.startswith("Found 250 of 300 matches\n\na.txt\nLine 1: hit 0\n")
    assert head.endswith("b.txt\nLine 1: hit 0\n" + "\n".join(f"Line {i + 1}: hit {i}" for i in range(1, 50)))
    match = SPILL.search(footer)
    assert footer.startswith("(Full grep result stored at: ")
    assert match is not None
    full = Path(match.group(1)).read_text()
    assert full.startswith("Found 300 matches\n\na.txt\n")
    assert full.endswith("Line 100: hit 99")


async def test_grep_bad_regex(h: Harness) -> None:
    touch(workspace(h) / "a.txt", "x\n")
    outcome = await h.call("grep", {"pattern": "(unclosed"})
    assert outcome.error == {"name": "SearchError", "code": "SEARCH_INVALID_PATTERN"}
    if shutil.which("rg"):
        assert text_of(outcome).startswith("Error: grep pattern rejected by ripgrep: regex parse error")
    else:
        assert text_of(outcome) == "Error: grep pattern rejected: missing ), unterminated subpattern at position 0"


async def test_search_tools_declare_their_deadline(h: Harness) -> None:
    assert h.tools.lookup(None, "glob").timeout_ms == 30000  # type: ignore[union-attr]
    assert h.tools.lookup(None, "grep").timeout_ms == 30000  # type: ignore[union-attr]
    assert h.tools.execution_mode(h.exec("grep", {"pattern": "x"})) == "exclusive"


async def test_grep_guidance_mentions_read_only_when_read_exists(h: Harness, tmp_path: Path) -> None:
    system_prompt = h.kernel.ctx.require(SYSTEM_PROMPT)
    text = system_prompt.render(await system_prompt.assemble(agent=h.agent))
    assert "read the matched file" in text
    bare = await harness(tmp_path, [("tools", None), ("tool-fs-search", None)])
    try:
        bare_prompt = bare.kernel.ctx.require(SYSTEM_PROMPT)
        text = bare_prompt.render(await bare_prompt.assemble(agent=bare.agent))
        assert "use the grep tool" in text
        assert "read the matched file" not in text
    finally:
        await bare.close()


async def test_ripgrep_failure_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rg"
    fake.write_text("#!/bin/sh\necho 'rg: something went wrong' >&2\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    world = await harness(tmp_path, [("tools", None), ("tool-fs-search", None)])
    try:
        outcome = await world.call("grep", {"pattern": "x"})
        assert text_of(outcome) == "Error: grep search failed (exit 2): rg: something went wrong"
        assert outcome.error == {"name": "SearchError", "code": "SEARCH_FAILED"}
    finally:
        await world.close()


async def test_reference_caps_and_over_cap_sampling_across_top_level_entries(tmp_path: Path) -> None:
    w = tmp_path / "w"
    config = {"sampleOverCapGlobResults": True, "globMaxResults": 5, "grepMaxMatches": 2}
    world = await harness(w, [("tools", None), ("tool-fs", None), ("tool-fs-search", config)])
    try:
        for i, name in enumerate(["a/1.md", "a/2.md", "a/3.md", "b/1.md", "b/2.md", "c/1.md", "top.md"]):
            touch(w / name, "hit\n", mtime=1_700_000_000_000_000_000 + i * 1000)
        out = (await world.text("glob", {"pattern": "*.md"})).split("\n")
        assert out[:6] == ["a/1.md", "a/2.md", "b/1.md", "c/1.md", "top.md", ""]
        assert out[6].startswith(
            "(Showing 5 of 7 paths, sampled across 4 of the 4 top-level entries this pattern matched instead of "
            "taken in modification-time order. Full sorted result stored at: "
        )
        assert (await world.text("grep", {"pattern": "hit"})).startswith("Found 2 of 7 matches\n\n")
        glob = world.tools.lookup(None, "glob")
        assert glob is not None
        assert (
            "at most 5; when there are more, a sample spread across the top-level entries is shown" in glob.description
        )
    finally:
        await world.close()
