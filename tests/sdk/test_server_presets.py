"""The SDK server joins the roster's default preset when its profile composes one (spec 10 §1.7)."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from pydsh.session.persistence.jsonl import read_header
from tests.sdk.conftest import Raw

ROSTER = [{"insert": [{"id": "presets", "name": "pydsh:include", "config": {"bundle": "presets"}}]}]


def test_sessions_of_a_roster_profile_join_the_default_preset(ws: Path, tmp_path: Path) -> None:
    patch = tmp_path / "roster.yml"
    patch.write_text(yaml.safe_dump(ROSTER))
    raw = Raw(ws, args=("--patch", str(patch)))
    try:
        assert "result" in raw.initialize()
        answer = raw.request(1, "session/working-directory/get", {"sessionId": "s-1"})
        assert answer["result"]["cwd"] == str(ws)
        assert raw.request(2, "shutdown") == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert raw.wait() == 0
    finally:
        raw.stop()
    stderr = b"".join(raw.stderr).decode()
    assert "without joining an agent preset" not in stderr
    [log] = Path(os.environ["DSH_HOME"]).glob("sessions/*/s-1/session.v4.jsonl.zstd")
    assert read_header(log)["agentPreset"] == "standard"
