"""An answer's Markdown drawn piece by piece, so a streaming answer costs each tick only its growing end.

Rich parses and lays out a whole Markdown text at every draw (30 KB: about 150 ms), and Textual redraws
every line of a widget it refreshes, while a streaming answer is redrawn every 50 ms tick. Here the text is
cut at blank lines where the pieces, stacked, draw exactly as the whole does; the screen gives each piece a
widget of its own (``widgets.AnswerView``), so a tick redraws only the growing last piece, and a piece
keeps its drawn lines. Rich's Markdown is imported on the first draw, as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.segment import Segment

PIECE = 600
"""Characters a piece holds at least before it may end: a piece of about this size draws in 2-4 ms (a code
block's highlighting included), and a 30 KB answer is some fifty widgets."""
FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
RAW_HTML = re.compile(r" {0,3}(?:<!--|<(pre|script|style|textarea)(?:[\s>]|$))", re.IGNORECASE)
"""The HTML blocks that run on across blank lines, to their end (``-->`` or the closing tag)."""
OPENS_PARAGRAPH = re.compile(r"(?!\d{1,9}[.)](?:[ \t]|$))[^\W_]|#{1,6}(?:[ \t]|$)")
"""A line a cut may come before: it opens a paragraph with a letter or digit (not an ordered list item),
or it is a heading. Anything else (an indented line, a list item, a quote, a table, a fence, a rule,
HTML) is never at the start of a piece, so no block is split and no list is renumbered."""


def pieces(text: str, size: int = PIECE) -> list[str]:
    """``text`` cut before a line that opens a paragraph or heading, after a blank line outside a code fence
    or raw HTML, once the piece before has ``size`` characters. A cut depends only on the text before it and
    the whole line after it, so the pieces of a growing text stay as they were and only the last one grows.
    (A reference-style link whose definition is in a later piece draws as plain text.)"""
    cuts = [0]
    for start, line in _after_blank_lines(text):
        if start - cuts[-1] >= size and OPENS_PARAGRAPH.match(line):
            cuts.append(start)
    return [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)]


def last_block(text: str) -> str:
    """The end of ``text`` from its last top-level block on: the last unindented line after a blank line."""
    begins = [start for start, line in _after_blank_lines(text) if line.strip() and line[0] not in " \t"]
    return text[begins[-1] :] if begins else text


def _after_blank_lines(text: str) -> Iterator[tuple[int, str]]:
    """Each whole line that follows a blank line outside a code fence or raw HTML, and where it starts."""
    closer = ""
    blank = False
    start = 0
    while (end := text.find("\n", start)) >= 0:
        line = text[start:end]
        if closer:
            closer = "" if _closes(line, closer) else closer
        else:
            if blank:
                yield start, line
            closer = _opens(line)
        blank = not closer and not line.strip()
        start = end + 1


def _opens(line: str) -> str:
    """What ends the block ``line`` opens if that block may hold blank lines (a fence, raw HTML), else ``""``."""
    if fence := FENCE.match(line):
        return fence[1]
    if html := RAW_HTML.match(line):
        closer = f"</{html[1].lower()}>" if html[1] else "-->"
        return "" if closer in line[html.end() :].lower() else closer
    return ""


def _closes(line: str, closer: str) -> bool:
    if closer[0] in "`~":
        stripped = line.strip()
        return stripped.startswith(closer) and not stripped.strip(closer[0])
    return closer in line.lower()


class Piece:
    """One piece's Markdown, drawn once per width; ``gap`` is the blank lines the whole text puts after it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.last = True
        self._lines: dict[int, list[list[Segment]]] = {}
        self._gap: int | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment

        width = options.max_width
        lines = self._lines.get(width)
        if lines is None:
            lines = self._lines[width] = self._draw(self.text, console, options)
        gap = 0 if self.last else self.gap(console, options)
        newline = Segment.line()
        for line in lines:
            yield from line
            yield newline
        for _ in range(gap):
            yield newline

    def gap(self, console: Console, options: ConsoleOptions) -> int:
        """The blank lines between this piece and a paragraph after it in one text, which depend on how its last
        block ends: that block drawn alone and with a probe paragraph after it, the lines beyond its own."""
        if self._gap is None:
            block = last_block(self.text)
            alone = self._draw(block, console, options)
            probed = self._draw(block.rstrip("\n") + "\n\nx\n", console, options)
            self._gap = max(0, len(probed) - len(alone) - 1)
        return self._gap

    @staticmethod
    def _draw(text: str, console: Console, options: ConsoleOptions) -> list[list[Segment]]:
        """Every line of ``text`` at the width of ``options`` (a height there would cut the lines kept)."""
        from rich.markdown import Markdown

        return console.render_lines(Markdown(text), options.update(height=None), pad=False)
