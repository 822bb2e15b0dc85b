"""``persona``: a preset's own persona text, shadowing the deployment persona (spec 10 §1.5–1.6).

The section is registered under the deployment persona's name in the registering scope, so a
preset's persona replaces the host's for the agents that joined it. ``complete`` makes it the
whole system prompt; ``includeRuntimeContext: false`` keeps only required runtime contexts.
"""

from __future__ import annotations

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.agent.prompt import SystemPrompt
from pydsh.kernel.config import BaseModel, ConfigDict
from pydsh.kernel.context import Context

PREFIX_SECTION = "deployment:persona-prefix"
SUFFIX_SECTION = "deployment:persona-suffix"


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    prefix: str
    suffix: str | None = None
    complete: bool = False
    includeRuntimeContext: bool = True


name = "persona"
inject = (SYSTEM_PROMPT,)


def apply(ctx: Context, config: Config) -> None:
    prompt: SystemPrompt = ctx.require(SYSTEM_PROMPT)
    prompt.section(ctx, PREFIX_SECTION, 0, config.prefix, complete=config.complete)
    if config.suffix and not config.complete:
        prompt.section(ctx, SUFFIX_SECTION, 10200, config.suffix)
    if not config.includeRuntimeContext:
        prompt.suppress_runtime_context(ctx)
