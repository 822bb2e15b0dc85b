"""Unpaired UTF-16 surrogates, decided once: replaced by U+FFFD where text enters a session log, and never
allowed to make an encoder fail where text leaves for a model.

A lone surrogate (half an emoji cut by a JavaScript editor, a model's ``"\\ud83d"`` escape inside tool
arguments, a peer agent's message) is a valid Python ``str`` but not encodable as UTF-8; stored once, it
would make every later request of that session fail. A surrogate *pair* that arrived as two code points
is joined into the one character it encodes.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """``text`` with surrogate pairs joined and every unpaired surrogate replaced by U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; unpaired surrogates (from a log written before they were replaced) become U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return without_lone_surrogates(text).encode("utf-8")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, JavaScript's ``length`` (astral characters count twice); the
    token heuristic prices every message with it, so it is counted by the codec rather than per character."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
