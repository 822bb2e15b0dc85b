"""An answer drawn piece by piece draws exactly as rich draws the whole text, and a growing answer on screen
redraws only its last piece."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll

from pydsh.apps.tui.feed import Block
from pydsh.apps.tui.markdown import Piece, last_block, pieces
from pydsh.apps.tui.widgets import AnswerView, view_of

BLOCKS = [
    "A paragraph with **bold**, *emphasis*, `code` and a [link](https://example.com) that wraps at a narrow width.",
    "A paragraph\nwith a soft break and 2024 in it.",
    "2024 was the year this paragraph begins with.",
    "# A first-level heading",
    "## A second-level heading",
    "Setext heading\n==============",
    "- one\n- two",
    "- loose one\n\n  its second paragraph\n- loose two",
    "* star\n+ plus",
    "1. first\n2. second",
    "3. third\n\n   still third\n4. fourth",
    "> a quote\n> on two lines",
    "> a quote\n\n> and another",
    "```python\ndef f():\n\n    return 1\n```",
    "~~~\nraw text\n\nafter a blank line\n~~~",
    "````\n```\nnot a close\n\n```\n````",
    "    indented code\n\n    more indented code",
    "---",
    "| name | value |\n|------|-------|\n| a    | 1     |",
    "<!-- a comment\n\nStill the comment -->",
    "<pre>\nkept\n\nAs it is\n</pre>",
    "Text\n\n\n\nafter many blank lines",
]


def drawn(renderable: RenderableType, width: int) -> list[list[Segment]]:
    console = Console(width=width, file=io.StringIO(), color_system="truecolor")
    return console.render_lines(renderable, console.options, pad=False)


def stacked(text: str, size: int) -> Group:
    """The pieces as the answer's widget stacks them: each but the last followed by its gap."""
    parts = [Piece(piece) for piece in pieces(text, size)]
    for part in parts[:-1]:
        part.last = False
    return Group(*parts)


documents = st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=8).map("\n\n".join)


@settings(max_examples=150, deadline=None)
@given(documents, st.booleans(), st.sampled_from([24, 80]))
def test_the_pieces_draw_as_the_whole_text_does(text: str, newline: bool, width: int) -> None:
    text += "\n" if newline else ""
    assert drawn(stacked(text, 1), width) == drawn(Markdown(text), width)


@settings(max_examples=60, deadline=None)
@given(documents)
def test_a_growing_text_keeps_its_earlier_pieces(text: str) -> None:
    whole = pieces(text, 1)
    for end in range(len(text) + 1):
        grown = pieces(text[:end], 1)
        assert grown[:-1] == whole[: len(grown) - 1]
        assert "".join(grown) == text[:end]


def test_a_piece_draws_all_its_lines_whatever_height_it_is_offered() -> None:
    text = "".join(f"Line {n}\n\n" for n in range(20))
    console = Console(width=40, file=io.StringIO())
    lines = console.render_lines(Piece(text), console.options.update(height=5), pad=False)
    assert len(console.render_lines(Piece(text), console.options, pad=False)) == 39
    assert len(lines) == 5  # the caller's height still cuts what it shows ...
    piece = Piece(text)
    console.render_lines(piece, console.options.update(height=5), pad=False)
    assert len(console.render_lines(piece, console.options, pad=False)) == 39  # ... but not what the piece keeps


def test_cuts_come_only_before_a_paragraph_or_heading_after_a_blank_line() -> None:
    text = "Intro\n\n- item\n\n  more\n\n```\ncode\n\nNot a paragraph\n```\n\n    indented\n\n# Heading\n\nEnd\n"
    assert pieces(text, 1) == [
        "Intro\n\n- item\n\n  more\n\n```\ncode\n\nNot a paragraph\n```\n\n    indented\n\n",
        "# Heading\n\n",
        "End\n",
    ]


def test_the_last_block_starts_at_the_last_unindented_line_after_a_blank_line() -> None:
    assert last_block("Intro\n\n- one\n\n  more of one\n- two\n") == "- one\n\n  more of one\n- two\n"
    assert last_block("Intro\n\n```\ncode\n\nstill code\n```\n") == "```\ncode\n\nstill code\n```\n"
    assert last_block("Just one paragraph.\n") == "Just one paragraph.\n"


def test_pieces_grow_to_the_given_size_before_a_cut() -> None:
    text = "".join(f"Paragraph {n} of the answer.\n\n" for n in range(100))
    cut = pieces(text, 200)
    assert "".join(cut) == text
    assert all(len(piece) >= 200 for piece in cut[:-1])
    assert all(len(piece) < 200 + 40 for piece in cut[:-1])


class Transcript(App[None]):
    def __init__(self, block: Block) -> None:
        super().__init__()
        self.block = block

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield view_of(self.block)


async def test_a_streaming_answer_redraws_only_its_growing_piece(monkeypatch: object) -> None:
    draws: list[str] = []
    draw = Piece._draw

    def counted(text: str, console: Console, options: object) -> list[list[Segment]]:
        draws.append(text)
        return draw(text, console, options)  # type: ignore[arg-type]

    monkeypatch.setattr(Piece, "_draw", staticmethod(counted))  # type: ignore[attr-defined]
    block = Block("live-text-0", "text")
    app = Transcript(block)
    async with app.run_test(size=(80, 30)) as pilot:
        view = app.query_one(AnswerView)
        for n in range(40):
            block.text += f"Sentence {n} of a long answer, and some more words to make it wrap.\n\n"
            block.version += 1
            view.refresh_block()
            await pilot.pause()
        texts = pieces(block.text)
        assert len(texts) > 1
        assert [piece.text for piece, _ in view.shown] == texts
        assert len(view.children) == len(texts)
        for text in texts[:-1]:
            assert draws.count(text) == 1  # drawn once when it stopped growing
            assert draws.count(last_block(text).rstrip("\n") + "\n\nx\n") == 1  # its gap probed once
        block.text = "Replaced by a short final text."
        block.version += 1
        view.refresh_block()
        await pilot.pause()
        assert [piece.text for piece, _ in view.shown] == ["Replaced by a short final text."]
        assert len(view.children) == 1
