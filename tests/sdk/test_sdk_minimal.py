"""The ``sdk-minimal`` profile (spec 06 §2.3): ``DeepSeekHarness(profile="sdk-minimal")`` as the SDK README shows.

A fixed system prompt (``DSH_SYSTEM_PROMPT`` replaces it), only ``bash``, ``read_image`` and
``working_directory``, unconfined shells, no policy events and ``maxTokensAsSuccess`` off — what the
reference's profile of that name advertises.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deepseek_harness
import yaml

from tests.sdk.conftest import PYDSH, REPO, SAFETY_S, ClientKind, ThreadedMock
from tests.sdk.reference import REFERENCE, needs_reference

PROMPT = "You are a helpful software engineer assistant."
BASH = {"tool_calls": [{"name": "bash", "arguments": {"command": "cd .. && pwd && echo $((6 * 7))"}}]}


def request_of(model: ThreadedMock, index: int = 0) -> tuple[list[str], Any]:
    """Tool names and system prompt of one model request."""
    body = model.requests[index]["body"]
    return [tool["name"] for tool in body["tools"]], body["system"]


def test_sdk_minimal_serves_a_fixed_prompt_bash_read_image_and_working_directory(
    client: ClientKind, mock: Callable[..., ThreadedMock]
) -> None:
    model = mock([BASH, {"text": "done"}])
    with client.harness(model.base_url, profile="sdk-minimal") as harness:
        result = harness.run("where are we?", session_id="m1")
    assert (result.final_response, result.finish_reason) == ("done", "completed")
    assert request_of(model) == (["bash", "read_image", "working_directory"], PROMPT)
    types = [e["type"] for e in client.wire.events("m1")]
    assert not {"permission/preset", "sandbox/mode", "approval/policy"} & set(types)
    output = next(e for e in result.events if e["type"] == "tool/result")["data"]["message"]["content"][0]["text"]
    assert f"{client.ws.parent}\n42" in output
    context = model.requests[0]["body"]["messages"][0]["content"][1]["text"]
    assert context.endswith(f'Current working directory: "{client.ws}".')


def test_sdk_minimal_prompt_comes_from_the_environment(client: ClientKind, mock: Callable[..., ThreadedMock]) -> None:
    model = mock([{"text": "ok"}])
    with client.harness(model.base_url, profile="sdk-minimal", env={"DSH_SYSTEM_PROMPT": "Be terse."}) as harness:
        harness.run("hi", session_id="m2")
    assert request_of(model)[1] == "Be terse."


def test_sdk_minimal_reports_max_tokens_as_an_error() -> None:
    dumped = subprocess.run(
        [PYDSH, "--profile", "sdk-minimal", "--dump-config"], capture_output=True, text=True, timeout=SAFETY_S
    )
    assert dumped.returncode == 0, dumped.stderr
    rows = {row["id"]: row for row in yaml.safe_load(dumped.stdout)}
    assert rows["sdk-server"]["config"] == {"maxTokensAsSuccess": False}
    assert all(rows[name]["disabled"] is True for name in ("permission", "sandbox-policy", "approval"))


@needs_reference
def test_sdk_minimal_advertises_what_the_reference_does(
    mock: Callable[..., ThreadedMock], tmp_path: Path, ws: Path
) -> None:
    seen = {}
    for runtime, exe in (("reference", REFERENCE), ("pydsh", PYDSH)):
        model = mock([{"text": "ok"}])
        harness = deepseek_harness.DeepSeekHarness(
            dsh_bin=exe,
            dsh_home=str(tmp_path / runtime),
            cwd=str(ws),
            api_key="sk-test",
            base_url=model.base_url,
            profile="sdk-minimal",
            env={"PYTHONPATH": str(REPO)},
        )
        with harness:
            result = harness.start_session().run("hi")
        events = [e["type"] for e in result.events if e["type"] != "session-log-deepseek/delivery-accepted"]
        seen[runtime] = (*request_of(model), events, model.requests[0]["body"]["messages"])
    tools, system, events, messages = seen["pydsh"]
    assert (tools, system, events, messages) == seen["reference"]
