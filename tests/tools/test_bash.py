"""The one-shot bash tool: rendering, validation, environment, timeouts, background jobs (spec 05 §4.4)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from pydsh.agent.hooks import AGENT_DISPOSED
from pydsh.agent.keys import WORKING_DIRECTORY
from pydsh.kernel.keys import HOST_INFO
from pydsh.session.keys import SESSION_PERSISTENCE
from pydsh.tools.jobs import FINISHED_KEPT, Job, JobRegistry
from pydsh.tools.keys import JOBS as JOBS_KEY
from tests.tools.harness import POLICY, Harness, harness, text_of

DANGER = [*POLICY[:2], ("permission", {"mode": "danger-full-access"})]
JOBS = [("tools", None), ("tool-bash", None), ("jobs", None), ("tool-jobs", None)]


@pytest.fixture
async def h(tmp_path: Path) -> Any:
    world = await harness(tmp_path, JOBS + DANGER, startup=True)
    yield world
    await world.close()


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"description": "Run a test command", "command": command, **extra}


def job_of(h: Harness, job_id: str) -> Job:
    registry: JobRegistry = h.kernel.ctx.require(JOBS_KEY)
    job = registry.get(h.agent.id, job_id)
    assert job is not None
    return job


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo hi; echo err 1>&2; exit 3", "hi\n[stderr]\nerr\n[exit code: 3]"),
        ("true", "(no output)"),
        ("kill -9 $$", "(no output)\n[killed by signal: SIGKILL]"),
        ("printf partial", "partial"),
        ("echo only-err >&2", "[stderr]\nonly-err\n"),
        ("printf x; printf y >&2; exit 1", "x\n[stderr]\ny\n[exit code: 1]"),
    ],
)
async def test_rendering(h: Harness, command: str, expected: str) -> None:
    outcome = await h.call("bash", bash(command))
    assert text_of(outcome) == expected
    assert not outcome.is_error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (bash("  "), "invalid command: expected a non-empty string"),
        ({"description": "", "command": "true"}, "invalid description: expected a non-empty string"),
        (bash("true", timeoutMs=0), "invalid timeoutMs: expected a positive number, got 0"),
        (bash("true", timeoutMs=-5.0), "invalid timeoutMs: expected a positive number, got -5"),
        (bash("true", timeoutMs="1s"), 'invalid arguments: "timeoutMs" must be a number'),
        ({"command": "true"}, 'invalid arguments: missing required property "description"'),
        (bash("true", workdir="missing"), 'workdir does not exist: "{W}/missing"'),
    ],
)
async def test_validation(h: Harness, tmp_path: Path, args: dict[str, Any], message: str) -> None:
    outcome = await h.call("bash", args)
    assert text_of(outcome) == "Error: " + message.replace("{W}", str(tmp_path))


async def test_workdir_and_working_directory(h: Harness, tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    assert await h.text("bash", bash("pwd", workdir="sub")) == f"{tmp_path / 'sub'}\n"
    h.kernel.ctx.require(WORKING_DIRECTORY).change(h.agent, "sub")
    assert await h.text("bash", bash("pwd")) == f"{tmp_path / 'sub'}\n"
    assert await h.text("bash", bash("pwd", workdir="deeper")) == f"{tmp_path / 'sub' / 'deeper'}\n"


async def test_fresh_shell_and_managed_environment(h: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "k")
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    monkeypatch.setenv("DSH_SESSION_ID", "spoofed")
    monkeypatch.setenv("PLAIN_VALUE", "kept")
    h.kernel.ctx.provide(HOST_INFO, {"profile": "sdk", "profile_dir": "/profiles/sdk"})
    script = (
        'echo "$DSH_SHELL|$DSH_SESSION_ID|$DSH_PROFILE|$DSH_PROFILE_DIR|$PLAIN_VALUE|${MY_API_KEY-unset}|'
        '${GITHUB_TOKEN-unset}|$DSH_HOME"; export CARRIED=1'
    )
    out = await h.text("bash", bash(script))
    assert out == f"1|s-1|sdk|/profiles/sdk|kept|unset|unset|{os.environ['DSH_HOME']}\n"
    assert await h.text("bash", bash('echo "${CARRIED-gone}"; read line; echo "stdin:$line"')) == "gone\nstdin:\n"


async def test_session_jsonl_from_persistence(h: Harness, tmp_path: Path) -> None:
    class Handle:
        path = tmp_path / "session.v4.jsonl"

    class Persistence:
        def handle_of(self, session_id: str) -> Any:
            return Handle() if session_id == "s-1" else None

    h.kernel.ctx.provide(SESSION_PERSISTENCE, Persistence())
    assert await h.text("bash", bash('echo "$DSH_SESSION_JSONL"')) == f"{tmp_path / 'session.v4.jsonl'}\n"


async def test_foreground_expiry_moves_to_the_background(h: Harness) -> None:
    outcome = await h.call("bash", bash("echo started; sleep 4; echo slept", timeoutMs=1000))
    text = text_of(outcome)
    first, rest = text.split("\n", 1)
    assert first == "started"
    job_id = rest.split("moved to background job ")[1].split("]")[0]
    assert rest == (
        f"[still running after 1000ms; moved to background job {job_id}]\n"
        "The command keeps running in the background. You will be notified when it finishes; "
        "read newer output with job_output, stop it with job_kill."
    )
    (registered,) = h.events("job/registered")
    assert registered["data"]["jobId"] == job_id
    assert registered["data"]["label"] == "echo started; sleep 4; echo slept"
    out = await h.text("job_output", {"job_id": job_id, "wait": True})
    assert out == "slept\n[status: completed]"


async def test_background_job_notice_and_output(h: Harness) -> None:
    exec = h.exec("bash", bash("echo bg-out; exit 4", run_in_background=True))
    started = text_of(await h.run(exec))
    job_id = started.removeprefix("started background job ")
    assert job_id.startswith("bash-")
    assert len(job_id) == len("bash-") + 16
    await job_of(h, job_id).settled.wait()
    (notice,) = h.agent.injected
    line = "[status: completed, exit code: 4]"
    assert notice["content"][0]["text"] == (
        f"background job {job_id} (bash: echo bg-out; exit 4) finished {line}. Read its output with job_output."
    )
    assert notice["source"] == {"kind": "tool-jobs", "form": "notice", "summary": f"bash echo bg-out; exit 4 {line}"}
    assert await h.text("job_output", {"job_id": job_id, "wait": True}) == f"bg-out\n{line}"
    assert await h.text("job_output", {"job_id": job_id}) == f"(no new output)\n{line}"
    registered, settled = h.events("job/registered", "job/settled")
    assert registered["data"]["toolCall"] == {"callId": exec.call_id, "rootCallId": exec.call_id}
    assert registered["data"]["owner"] == "s-1"
    data = settled["data"]
    assert {k: data[k] for k in ("jobId", "kind", "status", "detail", "cause", "producerReported")} == {
        "jobId": job_id,
        "kind": "bash",
        "status": "completed",
        "detail": "exit code: 4",
        "cause": {"kind": "exit"},
        "producerReported": True,
    }
    assert data["finishedAt"] >= data["startedAt"]


async def test_idle_agent_gets_the_notice_as_a_followup(h: Harness) -> None:
    started = await h.text("bash", bash("sleep 0.2; echo done", run_in_background=True))
    job = job_of(h, started.removeprefix("started background job "))
    h.agent.status = "idle"
    await job.settled.wait()
    assert [m["source"]["kind"] for m in h.agent.followups] == ["tool-jobs"]
    assert h.agent.injected == []


async def test_job_list_and_kill(h: Harness) -> None:
    assert await h.text("job_list", {}) == "(no background jobs)"
    started = await h.text("bash", bash("sleep 30", run_in_background=True))
    job_id = started.removeprefix("started background job ")
    assert await h.text("job_list", {}) == f"{job_id} [bash] running — sleep 30"
    running = await h.text("job_output", {"job_id": job_id})
    assert running == "(no new output)\n[status: running]"
    assert (
        await h.text("job_kill", {"job_id": job_id, "reason": "not needed"})
        == f"requested cancellation of job {job_id}"
    )
    await job_of(h, job_id).settled.wait()
    assert await h.text("job_output", {"job_id": job_id}) == "(no new output)\n[stopped: not needed]\n[status: killed]"
    assert await h.text("job_kill", {"job_id": job_id}) == f"job {job_id} had already finished [status: killed]"
    assert h.agent.injected == []
    (settled,) = h.events("job/settled")
    assert settled["data"]["cause"] == {"kind": "kill", "reason": "not needed"}
    assert settled["data"]["producerReported"] is False


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("job_kill", {"job_id": "nope"}, "unknown job nope"),
        ("job_output", {"job_id": "nope"}, "unknown job nope"),
        ("job_output", {"job_id": ""}, 'invalid job_id: expected a non-empty string, got ""'),
    ],
)
async def test_job_errors(h: Harness, tool: str, args: dict[str, Any], message: str) -> None:
    outcome = await h.call(tool, args)
    assert (text_of(outcome), outcome.error) == (f"Error: {message}", None)


async def test_wait_timeout_leaves_the_job_running(h: Harness) -> None:
    started = await h.text("bash", bash("sleep 30", run_in_background=True))
    job_id = started.removeprefix("started background job ")
    out = await h.text("job_output", {"job_id": job_id, "wait": True, "timeout_ms": 50})
    assert out == "(no new output)\n[status: running]"
    bad = await h.call("job_output", {"job_id": job_id, "wait": True, "timeout_ms": -1})
    assert text_of(bad) == "Error: invalid timeout_ms: expected a positive number, got -1"


async def test_other_agents_jobs_are_unknown(h: Harness, tmp_path: Path) -> None:
    started = await h.text("bash", bash("sleep 30", run_in_background=True))
    job_id = started.removeprefix("started background job ")
    exec = h.exec("job_output", {"job_id": job_id})
    exec.agent = None
    exec.session = None
    assert text_of(await h.run(exec)) == f"Error: unknown job {job_id}"


async def test_turn_abort_kills_the_foreground_command(h: Harness, tmp_path: Path) -> None:
    inv = h.tools.invocation(h.exec("bash", bash("sleep 1; touch late.txt")))
    await inv.prepare()
    task = asyncio.create_task(inv.execute())
    await asyncio.sleep(0.2)
    h.controller.abort({"kind": "user"})
    await task
    assert text_of(await inv.commit()) == "Error: tool call aborted"
    await asyncio.sleep(1.2)
    assert not (tmp_path / "late.txt").exists()


async def test_without_a_job_registry(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("tool-bash", None), *DANGER], startup=True)
    try:
        schema = world.tools.lookup(None, "bash").parameters  # type: ignore[union-attr]
        assert "run_in_background" not in schema["properties"]
        background = await world.call("bash", bash("true", run_in_background=True))
        assert text_of(background) == "Error: background jobs unavailable"
        timed = await world.text("bash", bash("echo before; sleep 5", timeoutMs=300))
        assert timed == "before\n[timed out after 300ms]\n[killed by signal: SIGKILL]"
    finally:
        await world.close()


async def test_schema_shape_follows_the_composition(h: Harness, tmp_path: Path) -> None:
    full = h.tools.lookup(None, "bash").parameters  # type: ignore[union-attr]
    assert list(full["properties"]) == [
        "description",
        "command",
        "timeoutMs",
        "workdir",
        "run_in_background",
        "sandbox_permissions",
        "justification",
    ]
    bare = await harness(tmp_path, [("tools", None), ("tool-bash", None)])
    try:
        schema = bare.tools.lookup(None, "bash").parameters  # type: ignore[union-attr]
        assert list(schema["properties"]) == ["description", "command", "timeoutMs", "workdir"]
        sent = await bare.call("bash", bash("true", sandbox_permissions="danger-full-access", justification="j"))
        assert text_of(sent) == (
            "Error: sandbox_permissions is not available in this composition (no sandboxing executor to escalate)"
        )
    finally:
        await bare.close()


async def test_output_dropped_from_memory_names_the_full_output(h: Harness) -> None:
    started = await h.text("bash", bash("seq 1 30000; echo tail-line", run_in_background=True))
    job_id = started.removeprefix("started background job ")
    out = await h.text("job_output", {"job_id": job_id, "wait": True})
    first, rest = out.split("\n", 1)
    full = first.removeprefix("[some output was dropped from memory; full output: ").removesuffix("]")
    assert first != full
    assert Path(full).read_text() == "".join(f"{i}\n" for i in range(1, 30001)) + "tail-line\n"
    assert rest.endswith("29999\n30000\ntail-line\n[status: completed]")


async def test_disposing_the_agent_stops_and_drops_its_jobs(h: Harness) -> None:
    started = await h.text("bash", bash("sleep 30", run_in_background=True))
    job = job_of(h, started.removeprefix("started background job "))
    h.kernel.ctx.emit(AGENT_DISPOSED, {"agent": h.agent})
    await job.settled.wait()
    assert job.status == "killed"
    assert await h.text("job_list", {}) == "(no background jobs)"


async def background(h: Harness, command: str) -> str:
    started = await h.text("bash", bash(command, run_in_background=True))
    return started.removeprefix("started background job ")


async def test_finished_jobs_beyond_the_bound_are_forgotten_read_ones_first(h: Harness) -> None:
    registry: JobRegistry = h.kernel.ctx.require(JOBS_KEY)
    ids: list[str] = []
    for n in range(FINISHED_KEPT + 2):
        if n == FINISHED_KEPT:
            assert await h.text("job_output", {"job_id": ids[3]}) == "out-3\n[status: completed]"
        ids.append(await background(h, f"echo out-{n}"))
        await job_of(h, ids[-1]).settled.wait()
    kept = [job.id for job in registry.owned(h.agent.id)]
    assert kept == [job_id for n, job_id in enumerate(ids) if n not in (0, 3)]
    assert text_of(await h.call("job_output", {"job_id": ids[0]})) == f"Error: unknown job {ids[0]}"
    assert await h.text("job_output", {"job_id": ids[1]}) == "out-1\n[status: completed]"
    assert await h.text("job_output", {"job_id": ids[-1]}) == f"out-{FINISHED_KEPT + 1}\n[status: completed]"
    running = await background(h, "sleep 30")
    for _ in range(3):
        await job_of(h, await background(h, "echo more")).settled.wait()
    assert len(registry.owned(h.agent.id)) == FINISHED_KEPT + 1
    assert job_of(h, running).running
    assert all(job.unread for job in registry.owned(h.agent.id) if not job.running)
    expired = await h.text("bash", bash("sleep 0.3", timeoutMs=1))
    last = job_of(h, expired.rsplit("moved to background job ", 1)[1].split("]")[0])
    await last.settled.wait()
    assert not last.unread
    assert await h.text("job_output", {"job_id": last.id}) == "(no new output)\n[status: completed]"
