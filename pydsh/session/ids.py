"""The rule for session ids a caller chooses: what the session store can hold (spec 02 §9.2).

An id names a directory (``encodeSegment``) and travels in the model request headers, so it
must be non-empty, free of control characters and lone surrogates, and encode to a directory
name the filesystem accepts.
"""

from __future__ import annotations

import unicodedata

from pydsh.session.persistence.jsonl import encode_segment

NAME_MAX = 255


def session_id_problem(session_id: str) -> str | None:
    """Why ``session_id`` can never name a stored session (a phrase after "session id"), or ``None``."""
    if not session_id:
        return "is empty"
    for index, char in enumerate(session_id):
        if "\ud800" <= char <= "\udfff":
            return f"contains a lone surrogate U+{ord(char):04X} at index {index}"
        if unicodedata.category(char) == "Cc":
            return f"contains the control character U+{ord(char):04X} at index {index}"
    size = len(encode_segment(session_id))
    if size > NAME_MAX:
        return f"is too long: its directory name would be {size} bytes, more than {NAME_MAX}"
    return None
