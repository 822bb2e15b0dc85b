"""The English and Chinese READMEs stay in step: both show the same shell commands, in the same order."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


def commands(name: str) -> list[str]:
    """Every command line of the file's ``sh`` blocks, without trailing comments."""
    text = (ROOT / name).read_text(encoding="utf-8")
    lines = (line.split(" #")[0].rstrip() for block in FENCE.findall(text) for line in block.splitlines())
    return [line for line in lines if line]


def test_both_readmes_show_the_same_commands() -> None:
    english = commands("README.md")
    assert "pip install . && pydsh demo" in english
    assert commands("README.zh.md") == english


def test_the_chinese_readme_links_back_and_is_linked() -> None:
    assert "README.zh.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "README.md" in (ROOT / "README.zh.md").read_text(encoding="utf-8")
