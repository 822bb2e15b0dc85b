"""mypy sees through the seams a plugin author uses: a misspelt service method, event name or payload field
in a module written against ``pydsh.plugin`` fails ``mypy --strict``, and the correct spelling passes.

One mypy run checks every probe; each probe is a small plugin with exactly one mistake (or none).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HEADER = """\
from __future__ import annotations

from pydsh.plugin import (
    AGENT_STATUS,
    LLM,
    PRE_STEP,
    TOOLS,
    AgentStatus,
    Context,
    Emit,
    Next,
    PreStep,
    PreStepDecision,
    ServiceKey,
)

"""

PROBES: dict[str, tuple[str, str | None]] = {
    "correct": (
        """
        COUNTED: Emit[int] = Emit("probe/counted")

        async def step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
            print(payload["messages"], payload["agent"].id)
            return await nxt()

        def status(payload: AgentStatus) -> None:
            print(payload["status"])

        def apply(ctx: Context, config: None) -> None:
            ctx.on(PRE_STEP, step, name="probe", after=("instructions",))
            ctx.on(AGENT_STATUS, status)
            ctx.emit(COUNTED, 1)
            print(ctx.require(LLM).list_providers(), ctx.require(TOOLS).schemas(None))
        """,
        None,
    ),
    "service_method": (
        """
        async def apply(ctx: Context, config: None) -> None:
            await ctx.require(LLM).prepare_cal({"provider": "p", "model": "m"})
        """,
        r'"LlmService" has no attribute "prepare_cal"',
    ),
    "service_key": (
        """
        def apply(ctx: Context, config: None) -> None:
            ctx.require(TOOLZ).schemas(None)
        """,
        r'Name "TOOLZ" is not defined',
    ),
    "event_name": (
        """
        from pydsh.plugin import PRE_STPE

        async def step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
            return await nxt()

        def apply(ctx: Context, config: None) -> None:
            ctx.on(PRE_STPE, step)
        """,
        r'Module "pydsh.plugin" has no attribute "PRE_STPE"',
    ),
    "payload_field": (
        """
        async def step(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
            print(payload["mesages"])
            return await nxt()
        """,
        r'TypedDict "PreStep" has no key "mesages"',
    ),
    "listener_for_another_event": (
        """
        def status(payload: AgentStatus) -> None:
            print(payload["status"])

        def apply(ctx: Context, config: None) -> None:
            ctx.on(PRE_STEP, status)
        """,
        r'"on" of "Context"',
    ),
    "emitted_payload": (
        """
        COUNTED: Emit[int] = Emit("probe/counted")

        def apply(ctx: Context, config: None) -> None:
            ctx.emit(COUNTED, "one")
        """,
        r'"emit" of "Context"',
    ),
    "provided_value": (
        """
        WIDGETS: ServiceKey[list[str]] = ServiceKey("widgets")

        def apply(ctx: Context, config: None) -> None:
            ctx.provide(WIDGETS, {"a": 1})
        """,
        r'"provide" of "Context"',
    ),
}


def test_mypy_strict_fails_each_misspelling_and_passes_the_correct_probe(tmp_path: Path) -> None:
    for name, (body, _) in PROBES.items():
        (tmp_path / f"probe_{name}.py").write_text(HEADER + textwrap.dedent(body))
    probes = sorted(str(p) for p in tmp_path.glob("probe_*.py"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(REPO / ".mypy_cache"),
            *probes,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        match = re.match(r".*probe_(\w+)\.py:\d+: error: (.*)", line)
        if match:
            errors.setdefault(match.group(1), []).append(match.group(2))
    assert set(errors) == {name for name, (_, expected) in PROBES.items() if expected is not None}, done.stdout
    for name, (_, expected) in PROBES.items():
        if expected is not None:
            assert any(re.search(expected, error) for error in errors[name]), (name, errors[name])
