"""Our client against the reference runtime (spec 06 §13 #30), when its executable is available.

The reference executable ships in the ~95 MB ``deepseek-harness-runtime-bin`` wheel, which the
README's test command does not install; ``.ci/run`` installs it in a test-only virtual environment
and points ``PYDSH_REFERENCE_DSH`` at its ``deepseek-harness-sdk-runtime-<platform>`` executable.
"""

from __future__ import annotations

from pathlib import Path

from pydsh.sdk.client import AsyncHarness
from pydsh.testing.mock_model_server import MockModelServer
from tests.sdk.reference import REFERENCE, needs_reference

pytestmark = needs_reference


async def test_our_client_drives_the_reference_runtime(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    script = [
        {"text": "hello"},
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]},
        {"text": "read it"},
    ]
    settings = {"dsh_bin": REFERENCE, "dsh_home": str(tmp_path / "home"), "cwd": str(workspace), "api_key": "sk-test"}
    async with MockModelServer(sequence=script, repeat_last=True) as server:
        async with AsyncHarness(base_url=server.base_url, **settings) as harness:
            assert harness.server_info == {"name": "deepseek-harness-sdk-runtime", "version": "0.0.1"}
            session = harness.session("t1")
            first = await session.run("hi")
            assert (first.final_response, first.finish_reason) == ("hello", "completed")
            assert first.events[0]["type"] == "agent/inbox/spliced"
            second = await session.run("read a.txt")
            assert "tool/result" in [e["type"] for e in second.events]
            stored = second.events[-1]["seq"]
        async with AsyncHarness(base_url=server.base_url, **settings) as harness:
            resumed = await harness.resume_session("t1")
            third = await resumed.run("again")
            assert third.events[0]["seq"] > stored
            assert third.finish_reason == "completed"
