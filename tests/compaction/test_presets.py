"""The shipped presets compact: each has its own engine in an isolate realm, on the host's one meter (§1, §4.1)."""

from __future__ import annotations

from pathlib import Path

from pydsh.agent.keys import AGENT_PRESETS
from pydsh.agent.presets import AgentPresets, preset_setup
from pydsh.compaction.keys import COMPACTION, TOKEN_METER, TOOL_RESULT_PRUNER
from tests.agent.harness import start_host
from tests.compaction.helpers import providers, summary_text


async def test_standard_and_minimal_each_own_a_compaction_engine(tmp_path: Path) -> None:
    script = [[{"text": "hi"}, {"purpose": "compaction", "text": summary_text()}], [{"text": "hello"}]]
    host = await start_host(script, bundles=("base", "presets"), providers=providers(128000))
    try:
        roster: AgentPresets = host.kernel.ctx.require(AGENT_PRESETS)
        assert not any("broken" in p for p in roster.list())
        assert host.kernel.ctx.get(COMPACTION) is None
        setup = preset_setup(host.kernel.ctx)
        standard = (await host.create(tmp_path, agent_preset="standard", setup=setup)).agent
        minimal = (await host.create(tmp_path, agent_preset="minimal", setup=setup)).agent
        engines = [roster.service_for(agent, COMPACTION) for agent in (standard, minimal)]
        assert engines[0] is not None and engines[1] is not None and engines[0] is not engines[1]
        meter = host.kernel.ctx.require(TOKEN_METER)
        assert engines[0].meter is meter and engines[1].meter is meter
        assert roster.service_for(standard, TOOL_RESULT_PRUNER) is not None
        assert roster.service_for(minimal, TOOL_RESULT_PRUNER) is None
        await host.run(standard, "hi")
        await host.run(minimal, "hello")
        result = await engines[0].compact_now(standard, None)
        assert result.checkpoint_seq == standard.session.events[-2]["seq"]
        host.replay.assert_consumed()
    finally:
        await host.close()
