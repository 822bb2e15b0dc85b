"""Pre-step listeners placed by their own constraints, for the event-order tests."""

from __future__ import annotations

from pydsh.plugin import PRE_STEP, Context, Next, PreStep, PreStepDecision


async def passing(payload: PreStep, nxt: Next[PreStepDecision]) -> PreStepDecision:
    return await nxt()


def contrarian(ctx: Context, config: None) -> None:
    """Asks to run inside ``instructions`` yet outside the checkpoint, which ``agent/pre-step`` puts first."""
    ctx.on(PRE_STEP, passing, name="contrarian", after=("instructions",), before=("session-checkpoint-policy",))


def inner(ctx: Context, config: None) -> None:
    """Asks to run inside ``instructions`` and outside the skills."""
    ctx.on(PRE_STEP, passing, name="inner", after=("instructions",), before=("skills-invocation",))
