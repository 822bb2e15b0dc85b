"""A composed host plane with a scripted model, for driving real agents in tests."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydsh.agent.keys import AGENTS
from pydsh.agent.loop import LoopAgent, LoopHandle
from pydsh.agent.registry import AgentRegistry, CreateAgentOptions
from pydsh.contract.agent import AgentOptions, user_message
from pydsh.kernel import Kernel
from pydsh.kernel.compose import Composition, resolve_rows
from pydsh.llm.keys import LLM_REPLAY
from pydsh.testing import SCRIPTED_PROVIDERS, scripted_patch

REPLAY_PROVIDERS = SCRIPTED_PROVIDERS


def compose(bundles: list[str], patches: list[list[dict[str, Any]]]) -> Composition:
    comp = Composition()
    for bundle in bundles:
        comp.apply_patch(comp.includes.bundle_ops(bundle, "test"), f"bundle {bundle}")
    for i, patch in enumerate(patches):
        comp.apply_patch(copy.deepcopy(patch), f"test patch {i}")
    comp.check_ids()
    return comp


@dataclass
class Host:
    kernel: Kernel

    @property
    def agents(self) -> AgentRegistry:
        return self.kernel.ctx.require(AGENTS)  # type: ignore[no-any-return]

    @property
    def replay(self) -> Any:
        return self.kernel.ctx.require(LLM_REPLAY)

    async def create(self, cwd: Path, **kw: Any) -> LoopHandle:
        options = kw.pop("agent_options", AgentOptions())
        handle = await self.agents.create(CreateAgentOptions(cwd=str(cwd), agent_options=options, **kw))
        return handle  # type: ignore[return-value]

    async def run(self, agent: LoopAgent, text: str, **source: Any) -> list[dict[str, Any]]:
        """Queue ``text`` and return the events appended until the agent is idle again."""
        start = len(agent.session.events)
        agent.followup(user_message(text, {"kind": "user", **source} if source else None))
        await agent.when_idle()
        return agent.session.events[start:]

    async def close(self) -> None:
        await self.kernel.dispose()


async def start_host(
    scripts: list[Any],
    *,
    bundles: tuple[str, ...] = ("base", "agent-tools"),
    patches: tuple[list[dict[str, Any]], ...] = (),
    providers: list[dict[str, Any]] | None = None,
) -> Host:
    """Boot the shipped host and agent planes with the model replaced by ``scripts``."""
    comp = compose(list(bundles), [scripted_patch(scripts, providers), *patches])
    kernel = Kernel()
    await kernel.load(resolve_rows(comp.rows))
    return Host(kernel)


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
