"""The root of every pydsh exception, and the kernel's own: one class whose ``code`` names what went wrong."""

from __future__ import annotations

CODES = frozenset(
    {
        "DUPLICATE_SERVICE",
        "MISSING_SERVICE",
        "INACTIVE_EFFECT",
        "PLUGIN_NOT_FOUND",
        "CONFIG_INVALID",
        "COMPOSITION_INVALID",
        "EVENT_ORDER",
    }
)


class PydshError(Exception):
    """The root of pydsh's exceptions: ``except PydshError`` catches every failure pydsh raises on purpose."""


class KernelError(PydshError):
    """A kernel contract was violated; ``code`` is one of :data:`CODES`."""

    def __init__(self, code: str, detail: str = "") -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}" if detail else code)
