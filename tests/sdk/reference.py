"""Where the reference runtime's executable is, for the tests that drive it, and the one skip line.

The executable ships in the ``deepseek-harness-runtime-bin`` wheel that ``deepseek-harness-sdk``
brings; CI installs both in a test-only virtual environment and exports ``PYDSH_REFERENCE_DSH``.
"""

from __future__ import annotations

import os

import pytest

REFERENCE = os.environ.get("PYDSH_REFERENCE_DSH", "")
SKIP_REASON = (
    "reference runtime tests skipped: PYDSH_REFERENCE_DSH is not set (install deepseek-harness-sdk==0.2.1rc2, "
    "whose deepseek-harness-runtime-bin wheel holds the executable, in a test-only virtual environment)"
)
needs_reference = pytest.mark.skipif(not REFERENCE, reason=SKIP_REASON)
