"""A profile patch written for DeepSeek Harness starts ``pydsh headless`` (spec 01 §7, §8, §11).

With ``PYDSH_REFERENCE_DSH`` pointing at the reference executable, a second check shows the same
fixture composes in the reference too.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pydsh.testing.mock_model_server import MockModelServer

REPO = Path(__file__).resolve().parents[2]
PATCH = REPO / "tests" / "fixtures" / "reference-patch.yml"
REFERENCE = os.environ.get("PYDSH_REFERENCE_DSH", "")


class JsAsText(yaml.SafeLoader):
    """Reads the reference's ``!!js`` values as their source text."""


JsAsText.add_constructor("tag:yaml.org,2002:js", lambda loader, node: loader.construct_scalar(node))


@pytest.mark.skipif(not REFERENCE, reason="PYDSH_REFERENCE_DSH is not set")
def test_the_fixture_is_a_patch_the_reference_composes(tmp_path: Path) -> None:
    env = {**os.environ, "DSH_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [REFERENCE, "--profile", "sdk", "--patch", str(PATCH), "--dump-config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = {row["id"]: row for row in yaml.load(done.stdout, Loader=JsAsText)}
    assert rows["session-persistence-jsonl"]["config"]["compression"] == "zstd"
    assert rows["session-stats"]["name"] == "@deepseek-ai/dsh-session-stats"


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
        'row "system-prompt" (system-prompt): persona: a key pydsh does not know; ignored, as DeepSeek Harness '
        "ignores keys it does not know",
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
