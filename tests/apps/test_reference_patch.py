"""A profile patch written for DeepSeek Harness starts ``pydsh headless`` (spec 01 §7, §8, §11)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from pydsh.testing.mock_model_server import MockModelServer

REPO = Path(__file__).resolve().parents[2]
PATCH = REPO / "tests" / "fixtures" / "reference-patch.yml"


async def test_a_reference_patch_starts_headless_and_takes_effect(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    async with MockModelServer(sequence=[{"text": "Reviewed."}]) as server:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "DSH_HOME": str(home),
            "DEEPSEEK_BASE_URL": server.base_url,
            "DEEPSEEK_API_KEY": "sk-test",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pydsh",
            "--profile",
            "headless",
            "--patch",
            str(PATCH),
            "review this",
            cwd=work,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        requests = list(server.requests)
    stderr = err.decode()
    assert proc.returncode == 0, stderr
    assert out.decode().strip() == "Reviewed."
    warnings = [line for line in stderr.splitlines() if "WARNING" in line]
    assert [w.split("pydsh.kernel: ", 1)[1] for w in warnings] == [
        'row "session-stats" (@deepseek-ai/dsh-session-stats) skipped: pydsh has no such plugin',
        'row "session-persistence-jsonl" (session-persistence-jsonl): listConcurrency: a DeepSeek Harness key '
        "that has no effect here",
        'row "sandbox-policy" (sandbox-policy): mode: a DeepSeek Harness key that has no effect here; set the '
        "permission row's mode or DSH_PERMISSION_MODE",
        'row "sandbox-policy" (sandbox-policy): workspaceRoot: a DeepSeek Harness key that has no effect here; '
        "the workspace is the session's working directory",
        'row "tool-fs-search" (tool-fs-search): timeoutMs: a DeepSeek Harness key that has no effect here',
    ]
    body = json.dumps(requests[0]["body"])
    assert "You are a careful reviewer powered by the deepseek-v4-flash model." in body
    assert "DeepSeek Harness" not in body
    tools = [tool["name"] for tool in requests[0]["body"]["tools"]]
    assert "delegate" in tools
    assert "subagent" not in tools
    glob = next(tool for tool in requests[0]["body"]["tools"] if tool["name"] == "glob")
    assert "at most 40; when there are more, a sample spread across the top-level entries" in glob["description"]
    logs = list((home / "sessions").rglob("session.v4.jsonl*"))
    assert [p.name for p in logs] == ["session.v4.jsonl.zstd"]
