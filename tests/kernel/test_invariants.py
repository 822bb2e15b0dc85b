"""Invariant companions fail the test that caused a violation (spec 01 §9).

A violation is raised through ``emit`` (which contains every other listener failure), kept in the
process-wide record the suite's autouse fixture asserts empty, written to the report file a parent
process reads, and makes the host that saw it fail to close.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from pydsh.kernel import Context, Kernel, invariants
from pydsh.kernel.compose import Row
from pydsh.kernel.events import Emit
from pydsh.kernel.invariants import Config, InvariantError, Invariants
from pydsh.kernel.keys import INVARIANTS
from pydsh.testing.fixtures import Violations

REPO = Path(__file__).resolve().parents[2]
CHECKED: Emit[int] = Emit("test/checked")


def companion(ctx: Context, fail: Any) -> None:
    """A companion that refuses negative values."""

    def check(value: int) -> None:
        if value < 0:
            fail(f"negative value {value}")

    ctx.on(CHECKED, check)


def enabled(kernel: Kernel, **config: Any) -> Invariants:
    service = Invariants(Config(enabled=True, **config))
    service.register(kernel.ctx, "test-package", companion)
    return service


def test_a_violation_in_an_emit_listener_propagates_and_is_recorded() -> None:
    k = Kernel()
    service = enabled(k)
    k.ctx.emit(CHECKED, 1)
    with pytest.raises(InvariantError, match=r"^\[test-package\] negative value -1$") as raised:
        k.ctx.emit(CHECKED, -1)
    assert raised.value.code == "INVARIANT" and raised.value.package_name == "test-package"
    assert service.violations == [raised.value]
    assert invariants.drain() == [raised.value]
    assert invariants.drain() == []


async def test_a_violation_in_an_async_emit_listener_is_recorded() -> None:
    k = Kernel()

    def async_companion(ctx: Context, fail: Any) -> None:
        async def check(value: int) -> None:
            await asyncio.sleep(0)
            fail(f"negative value {value}")

        ctx.on(CHECKED, check)

    Invariants(Config(enabled=True)).register(k.ctx, "test-package", async_companion)
    k.ctx.emit(CHECKED, -1)
    await asyncio.sleep(0.01)
    assert [str(e) for e in invariants.drain()] == ["[test-package] negative value -1"]


def test_other_listener_failures_stay_contained() -> None:
    k = Kernel()
    enabled(k)
    seen: list[int] = []

    def broken(value: int) -> NoReturn:
        raise RuntimeError("not a violation")

    k.ctx.on(CHECKED, broken)
    k.ctx.on(CHECKED, seen.append)
    k.ctx.emit(CHECKED, 1)
    assert seen == [1] and invariants.drain() == []


def test_disabled_or_blocked_companions_install_nothing() -> None:
    for config in (Config(), Config(enabled=True, package_blocklist=["^test-"])):
        k = Kernel()
        Invariants(config).register(k.ctx, "test-package", companion)
        k.ctx.emit(CHECKED, -1)
    assert invariants.drain() == []


def test_the_report_file_gets_one_line_per_violation(tmp_path: Path) -> None:
    k = Kernel()
    report = tmp_path / "report.txt"
    enabled(k, report=str(report))
    for value in (-1, -2):
        with pytest.raises(InvariantError):
            k.ctx.emit(CHECKED, value)
    assert report.read_text().splitlines() == ["[test-package] negative value -1", "[test-package] negative value -2"]
    assert len(invariants.drain()) == 2


async def test_a_host_that_saw_a_violation_fails_to_close() -> None:
    k = Kernel()
    await k.load([Row("invariants", "invariants", {"enabled": True})])
    k.ctx.require(INVARIANTS).register(k.ctx, "test-package", companion)
    with pytest.raises(InvariantError):
        k.ctx.emit(CHECKED, -1)
    with pytest.raises(ExceptionGroup) as closing:
        await k.dispose()
    [error] = closing.value.exceptions
    assert isinstance(error, InvariantError)
    assert str(error) == "[invariants] 1 violation(s) recorded, first: [test-package] negative value -1"
    assert len(invariants.drain()) == 1


def status_echo_patch(tmp_path: Path) -> Path:
    """A patch serving a scripted model and loading the plugin that emits every status twice."""
    provider = {"id": "deepseek-official", "models": [{"id": "deepseek-v4-flash", "contextWindow": 128000}]}
    patch = tmp_path / "patch.yml"
    patch.write_text(
        yaml.safe_dump(
            [
                {"id": "llm-deepseek", "disabled": True},
                {
                    "insert": [
                        {
                            "id": "llm-replay",
                            "name": "llm-replay",
                            "config": {"scripts": [{"text": "hi"}], "providers": [provider]},
                        },
                        {"id": "status-echo", "name": "tests.kernel.status_echo"},
                    ]
                },
            ]
        )
    )
    return patch


def test_a_violation_in_a_headless_child_fails_it_and_reaches_the_report(
    tmp_path: Path, violations: Violations
) -> None:
    patch = status_echo_patch(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pydsh", "--profile", "headless", "--patch", str(patch), "hello"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "emitted status 'running' twice in a row" in result.stderr
    [line] = violations.take()
    assert re.fullmatch(r"\[agent-loop\] agent [0-9a-f-]{36} emitted status 'running' twice in a row", line)


def test_a_violation_in_an_sdk_server_child_is_answered_and_fails_its_exit(
    tmp_path: Path, violations: Violations
) -> None:
    patch = status_echo_patch(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "pydsh.sdk", "--patch", str(patch)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    route = {"cwd": str(tmp_path), "provider": "deepseek-official", "model": "deepseek-v4-flash"}
    prompt = {"sessionId": "t1", "contentBlocks": [{"type": "text", "text": "hi"}]}
    for rid, method, params in (("init", "initialize", route), ("p", "session/prompt", prompt)):
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n")
    server.stdin.flush()
    answer = next(frame for line in server.stdout if (frame := json.loads(line)).get("id") == "p")
    _, stderr = server.communicate(timeout=60)
    assert "emitted status 'running' twice in a row" in answer["error"]["message"]
    assert server.returncode != 0 and "1 violation(s) recorded" in stderr
    assert len(violations.take()) == 1
