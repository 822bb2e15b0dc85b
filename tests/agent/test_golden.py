"""The golden tool turn: the recorded three-``read`` scenario replayed through the real loop and tools.

The cassette is the golden fixture itself. The ``headless``/``sdk`` shape differs from the recorded
``web`` shape exactly as spec 02 §14.2 says: no time-context message (every later seq one lower), no
``agentPreset``, a plain ``user`` prompt source and no web-only runtime-context sections.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.agent.harness import start_host
from tests.conftest import FIXTURES

FILES = {
    "sample.pyi": "from typing import Protocol\n\nclass Greeter(Protocol):\n def greet(self, name: str) -> str: ...\n",
    "deploy.ps1": 'param([string]$Name = "World")\nWrite-Host "Hello, $Name"\n',
    "table.csv": "name,count\napples,12\npears,7\n",
}
WEB_ONLY_SECTIONS = ("harness:source", "app:web-surface")


def expected_headless() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The fixture rewritten to the rosterless shape of 02 §14.2."""
    lines = [json.loads(line) for line in (FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()]
    header, rows = lines[0], lines[1:]
    header.pop("agentPreset")
    out = []
    for row in rows:
        data = row["data"]
        if row["type"] == "user/message" and data["source"]["kind"] == "time-context":
            continue
        if row["type"] in ("agent/inbox/spliced", "user/message"):
            for message in data.get("inserted", [data]):
                if message["source"]["kind"] == "user":
                    message["source"] = {"kind": "user"}
        if row["type"] == "user/message" and data["source"]["kind"] == "runtime-context":
            sections = [s for s in data["source"]["sections"] if s["name"] not in WEB_ONLY_SECTIONS]
            data["source"]["sections"] = sections
            data["content"][0]["text"] = "\n\n".join(
                ["Current runtime context. This snapshot supersedes earlier runtime-context snapshots."]
                + [s["text"] for s in sections]
            )
        if "sourceEventSeqs" in row:
            row["sourceEventSeqs"] = [s - 1 for s in row["sourceEventSeqs"]]
        if row["type"] == "session/title":
            data["messageSeqs"] = [8]
        out.append(row)
    return header, out


class Normaliser:
    """Replaces run-specific values by the fixture's placeholders (02 §14.2 comparison rules).

    The recorder that produced the fixture collapsed runs of spaces inside tool-result text (its
    ``meta`` keeps the original line), so tool-result text is compared with runs collapsed.
    """

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.ids: dict[str, str] = {}

    def value(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, key) for v in value]
        if isinstance(value, str):
            if key == "id" and not value.startswith("call_"):
                return self.ids.setdefault(value, f"{{{{message:{len(self.ids) + 1}}}}}")
            return value.replace(self.cwd, "{{cwd}}")
        return value

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        row = {k: v for k, v in event.items() if k not in ("seq", "time")}
        row = self.value(json.loads(json.dumps(row)))
        if row["type"] == "system/message":
            row["data"]["message"]["content"] = [{"type": "text", "text": "{{system}}"}]
        if row["type"] == "request/header":
            row["data"]["header"]["tools"] = "{{tools}}"
        if row["type"] == "tool/result":
            for block in row["data"]["message"]["content"]:
                block["text"] = re.sub(" +", " ", block["text"])
        if row["type"] == "assistant/message":
            for record in row["data"]["stream"]:
                for field in ("time", "time0"):
                    if field in record:
                        record[field] = 0
                if "dt" in record:
                    record["dt"] = [0] * len(record["dt"])
        return row


async def test_golden_three_read_turn_in_the_headless_shape(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name, text in FILES.items():
        (workspace / name).write_text(text)
    patch = [
        {
            "id": "llm-replay",
            "config": {
                "file": str(FIXTURES / "recorded-tool-turn.jsonl"),
                "providers": [
                    {"id": "deepseek-official", "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000}]}
                ],
            },
        }
    ]
    host = await start_host([], patches=(patch,))
    try:
        handle = await host.create(workspace)
        agent = handle.agent
        prompt = json.loads((FIXTURES / "recorded-tool-turn.jsonl").read_text().splitlines()[4])["data"]
        await host.run(agent, prompt["inserted"][0]["content"][0]["text"])
        host.replay.assert_consumed()
        header, expected_rows = expected_headless()
        normaliser = Normaliser(str(workspace))
        produced = [normaliser.event(e) for e in agent.session.events]
        renumber = Normaliser("{{cwd}}")
        expected = [renumber.event(r) for r in expected_rows]
        assert [r["type"] for r in produced] == [r["type"] for r in expected]
        for got, want in zip(produced, expected, strict=True):
            assert json.dumps(got, sort_keys=True, indent=1) == json.dumps(want, sort_keys=True, indent=1)
        assert agent.session.header.keys() == header.keys()
    finally:
        await host.close()
