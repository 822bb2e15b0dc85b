"""The bus events the ``compaction`` package dispatches."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from pydsh.kernel.events import Waterfall

if TYPE_CHECKING:
    from pydsh.kernel.cancel import AbortSignal
    from pydsh.session.log import Session


class SummaryFailure(TypedDict):
    """Summarising ``sourceEventSeqs`` failed with ``error``; a listener may repair and answer ``True``."""

    session: Session
    sourceEventSeqs: list[int]
    error: Exception
    signal: AbortSignal | None


SUMMARY_ERROR: Waterfall[SummaryFailure, bool] = Waterfall(
    "compaction/summary-error", "whether compaction should try summarising again"
)
