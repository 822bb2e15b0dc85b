"""One session lifecycle under every frontend: the same checks, parametrised over the SDK server, ``pydsh web``,
``pydsh acp``, ``pydsh headless`` and the embedding API, so a rule cannot drift between them again.

- a prompt acknowledged is on disk (SDK response, web 202, ACP response, ``Agent.submit``; headless has no
  acknowledgement before its answer);
- a run's result has one reading: the final text is the *last* assistant message's (web shows messages,
  not a result; ACP answers with a stop reason);
- settling waits for background subagents and the turns their results start (web settles nothing);
- a session another process holds is refused with one clear error;
- a working directory that is missing, a file or not a path is refused where it enters;
- half an emoji (a lone UTF-16 surrogate) in a prompt is logged as U+FFFD and the turn completes.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pydsh
from pydsh.agent.keys import AGENTS
from pydsh.session.keys import SESSIONS
from pydsh.testing import scripted_host
from tests.host import frontends as fe
from tests.host.frontends import Outcome, Scripts

HANG: Scripts = [[{"hang": True}]]
READ = {"tool_calls": [{"name": "read", "arguments": {"file_path": "a.txt"}}]}
DELEGATE = {"tool_calls": [{"name": "subagent", "arguments": {"description": "say hi", "prompt": "Say hi"}}]}
SETTLING: Scripts = [[DELEGATE, {"text": "delegated"}, {"text": "root done"}], [{"text": "hi from the child"}]]
REASONING_LAST: Scripts = [[{**READ, "text": "I will read the file."}, {"reasoning": "It says alpha; nothing to add."}]]

Scenario = Callable[[Path, Path, Path], Coroutine[Any, Any, Outcome]]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "a.txt").write_text("alpha\n")
    return path


def run(scenarios: dict[str, Scenario]) -> Any:
    """Parametrise a check over the frontends that have it."""
    return pytest.mark.parametrize("frontend", sorted(scenarios))


# -- 1. an acknowledged prompt is on disk ----------------------------------------------------------


async def ack_sdk(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    peer = fe.sdk_session(tmp_path, home, HANG, ws)
    try:
        answer = await fe.in_thread(
            peer.call, "p", "session/prompt", {"sessionId": "s1", "contentBlocks": [{"type": "text", "text": "hold"}]}
        )
        on_disk = fe.stored_events(home, "s1")
        return Outcome("s1", on_disk=on_disk, message_id=answer["result"]["messageId"])
    finally:
        peer.proc.kill()
        peer.proc.wait()


async def ack_web(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(page: fe.WebPage) -> Outcome:
        created = await page.client.post("/api/sessions", json={"cwd": str(ws)})
        sid = created.json()["session"]["sessionId"]
        accepted = await page.client.post(f"/api/sessions/{sid}/prompt", json={"text": "hold", "mode": "queue"})
        assert accepted.status_code == 202, accepted.text
        return Outcome(sid, on_disk=fe.stored_events(home, sid), message_id=accepted.json()["messageId"])

    return await fe.with_web(tmp_path, home, HANG, ws, body)


async def ack_acp(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(conn: Any, editor: Any) -> Outcome:
        import acp

        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("quick")])
        return Outcome(sid, on_disk=fe.stored_events(home, sid))

    return await fe.with_acp(tmp_path, home, [[{"text": "done"}]], body)


async def ack_embed(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async with fe.embedded(HANG, home, ws) as host:
        agent = await host.create_agent()
        receipt = await agent.submit("hold")
        on_disk = fe.stored_events(home, agent.session_id)
        agent.cancel()
        return Outcome(agent.session_id, on_disk=on_disk, message_id=receipt.message_id)


ACK = {"sdk": ack_sdk, "web": ack_web, "acp": ack_acp, "embed": ack_embed}


@run(ACK)
async def test_an_acknowledged_prompt_is_on_disk(frontend: str, tmp_path: Path, home: Path, workspace: Path) -> None:
    outcome = await ACK[frontend](tmp_path, home, workspace)
    assert outcome.on_disk, "the session log was not on disk when the prompt was acknowledged"
    prompts = [e for e in outcome.on_disk if e["type"] == "agent/inbox/spliced" and e["data"]["inserted"]]
    texts = [m["content"][0]["text"] for e in prompts for m in e["data"]["inserted"]]
    assert texts and texts[-1] in ("hold", "quick")
    if outcome.message_id is not None:
        assert fe.receipt_on_disk(outcome.on_disk, outcome.message_id)
    if frontend == "acp":  # its acknowledgement is the answer at the end of the run: the whole run is on disk
        assert outcome.on_disk[-1]["type"] == "turn/end"


# -- 2. one reading of a run's result --------------------------------------------------------------


async def result_sdk(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    from pydsh.sdk.client import AsyncHarness

    launch = (sys.executable, "-m", "pydsh", "--profile", "sdk", "--patch", str(fe.patch(tmp_path, REASONING_LAST)))
    async with AsyncHarness(cwd=ws, dsh_home=home, launch_args=launch, env={"PYTHONPATH": str(fe.REPO)}) as harness:
        result = await harness.run("read a.txt", session_id="s1")
    return Outcome("s1", result.final_response, result.finish_reason)


async def result_headless(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    done = await fe.in_thread(
        lambda: fe.headless(tmp_path, home, REASONING_LAST, "--json", "--cwd", str(ws), "read a.txt")
    )
    assert done.returncode == 0, done.stderr
    out = fe.headless_final(done)
    return Outcome(out["session_id"], out["text"], out["finish_reason"])


async def result_embed(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async with fe.embedded(REASONING_LAST, home, ws) as host:
        result = await (await host.create_agent()).run("read a.txt")
    return Outcome(result.session_id, result.final_response, result.finish_reason)


RESULT = {"sdk": result_sdk, "headless": result_headless, "embed": result_embed}


@run(RESULT)
async def test_the_final_response_is_the_last_assistant_messages_text(
    frontend: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    """The run's last assistant message holds only reasoning: its text is ``""``, not an earlier message's."""
    outcome = await RESULT[frontend](tmp_path, home, workspace)
    assert (outcome.final_response, outcome.finish_reason) == ("", "completed")


# -- 3. settling waits for background subagents ----------------------------------------------------


async def settle_sdk(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    peer = fe.sdk_session(tmp_path, home, SETTLING, ws)
    try:
        await fe.in_thread(
            peer.call, "p", "session/prompt", {"sessionId": "s1", "contentBlocks": [{"type": "text", "text": "go"}]}
        )
        assert "result" in await fe.in_thread(peer.call, "w", "session/wait", {"sessionId": "s1"})
        return settled("s1", peer.events("s1"))
    finally:
        await fe.in_thread(peer.close)


async def settle_acp(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(conn: Any, editor: Any) -> Outcome:
        import acp

        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("go")])
        assert answer.stop_reason == "end_turn"
        said = [u["content"]["text"] for u in editor.updates("agent_message_chunk")]
        return Outcome(sid, said[-1] if said else None)

    return await fe.with_acp(tmp_path, home, SETTLING, body)


async def settle_headless(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    done = await fe.in_thread(lambda: fe.headless(tmp_path, home, SETTLING, "--json", "--cwd", str(ws), "go"))
    assert done.returncode == 0, done.stderr
    final = fe.headless_final(done)
    return settled(final["session_id"], fe.stored_events(home, final["session_id"]), final["text"])


async def settle_embed(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async with fe.embedded(SETTLING, home, ws) as host:
        agent = await host.create_agent()
        receipt = await agent.submit("go")
        await agent.settle()
        return settled(agent.session_id, agent.events, agent.result(receipt.seq).final_response)


def settled(session_id: str, events: list[dict[str, Any]], final: str | None = None) -> Outcome:
    texts = [
        b["text"]
        for e in events
        if e["type"] == "assistant/message"
        for b in e["data"]["message"]["content"]
        if b["type"] == "text"
    ]
    return Outcome(session_id, final if final is not None else texts[-1] if texts else None)


SETTLE = {"sdk": settle_sdk, "acp": settle_acp, "headless": settle_headless, "embed": settle_embed}


@run(SETTLE)
async def test_settling_waits_for_background_subagents_and_their_settlement_turn(
    frontend: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    outcome = await SETTLE[frontend](tmp_path, home, workspace)
    assert outcome.final_response == "root done"


# -- 4. a session owned by another process ---------------------------------------------------------


async def stored_session(home: Path, ws: Path) -> str:
    async with scripted_host([{"text": "first"}], cwd=ws, dsh_home=home) as host:
        agent = await host.create_agent(session_id="owned")
        await agent.run("first")
    return "owned"


@contextmanager
def held(home: Path, session_id: str) -> Iterator[None]:
    """The session's lock taken as another writer holds it."""
    [lock] = (home / "sessions").glob(f"*/{session_id}/session.lock")
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


async def reopen_sdk(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    """Ask each frontend to open the stored session ``owned`` again; the refusal it shows."""
    peer = fe.sdk_session(tmp_path, home, HANG, tmp_path)
    try:
        answer = await fe.in_thread(peer.call, "r", "session/resume", {"sessionId": "owned"})
        return Outcome(refusal=fe.error_text(answer))
    finally:
        await fe.in_thread(peer.close)


async def reopen_web(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(page: fe.WebPage) -> Outcome:
        sent = await page.client.post("/api/sessions/owned/prompt", json={"text": "steal", "mode": "queue"})
        return Outcome(refusal=fe.web_refusal(sent))

    return await fe.with_web(tmp_path, home, HANG, tmp_path, body)


async def reopen_acp(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(conn: Any, editor: Any) -> Outcome:
        import acp

        try:
            await conn.resume_session(cwd=str(ws), session_id="owned", mcp_servers=[])
        except acp.RequestError as exc:
            return Outcome(refusal=str(exc))
        raise AssertionError("the resume was not refused")

    return await fe.with_acp(tmp_path, home, HANG, body)


async def reopen_headless(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    done = await fe.in_thread(lambda: fe.headless(tmp_path, home, HANG, "--resume", "owned", "steal"))
    return Outcome(refusal=fe.headless_refusal(done))


async def reopen_embed(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async with fe.embedded(HANG, home, tmp_path) as host:
        with pytest.raises(pydsh.HostError) as refused:
            await host.resume_agent("owned")
    return Outcome(refusal=f"{refused.value.code}: {refused.value}")


REOPEN = {"sdk": reopen_sdk, "web": reopen_web, "acp": reopen_acp, "headless": reopen_headless, "embed": reopen_embed}


OWNED_TEXT = {
    "sdk": 'session "owned" is already owned by another writer',
    "web": '409 session_owned_elsewhere: Session "owned" is open in another pydsh process.',
    "acp": 'session "owned" is already owned by another writer',
    "headless": 'exit 1: pydsh: session "owned" is already owned by another writer',
    "embed": 'owned_elsewhere: session "owned" is already owned by another writer',
}


@run(REOPEN)
async def test_a_session_another_process_holds_is_refused(
    frontend: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    session_id = await stored_session(home, workspace)
    before = fe.stored_events(home, session_id)
    with held(home, session_id):
        outcome = await REOPEN[frontend](tmp_path, home, workspace)
    assert OWNED_TEXT[frontend] in (outcome.refusal or "")
    assert fe.stored_events(home, session_id) == before


# -- 5. a bad working directory is refused where it enters -----------------------------------------


def bad_directories(workspace: Path) -> dict[str, str]:
    (workspace / "file.txt").write_text("not a directory\n")
    return {
        "missing": str(workspace / "gone"),
        "file": str(workspace / "file.txt"),
        "nul": str(workspace) + "/a\0b",
    }


async def cwd_sdk(tmp_path: Path, home: Path, bad: Path) -> Outcome:
    peer = fe.SdkPeer(tmp_path, home, HANG)
    try:
        init = {"cwd": str(bad), "provider": "deepseek-official", "model": "deepseek-v4-flash"}
        answer = await fe.in_thread(peer.call, "init", "initialize", init)
        return Outcome(refusal=fe.error_text(answer))
    finally:
        await fe.in_thread(peer.close)


async def cwd_web(tmp_path: Path, home: Path, bad: Path) -> Outcome:
    async def body(page: fe.WebPage) -> Outcome:
        return Outcome(refusal=fe.web_refusal(await page.client.post("/api/sessions", json={"cwd": str(bad)})))

    return await fe.with_web(tmp_path, home, HANG, tmp_path, body)


async def cwd_acp(tmp_path: Path, home: Path, bad: Path) -> Outcome:
    async def body(conn: Any, editor: Any) -> Outcome:
        import acp

        try:
            await conn.new_session(cwd=str(bad), mcp_servers=[])
        except acp.RequestError as exc:
            return Outcome(refusal=str(exc))
        raise AssertionError("session/new was not refused")

    return await fe.with_acp(tmp_path, home, HANG, body)


async def cwd_headless(tmp_path: Path, home: Path, bad: Path) -> Outcome:
    done = await fe.in_thread(lambda: fe.headless(tmp_path, home, HANG, "--cwd", str(bad), "go"))
    return Outcome(refusal=fe.headless_refusal(done))


async def cwd_embed(tmp_path: Path, home: Path, bad: Path) -> Outcome:
    async with fe.embedded(HANG, home, tmp_path) as host:
        with pytest.raises(pydsh.HostError) as refused:
            await host.create_agent(cwd=bad)
    assert refused.value.code == "bad_workspace"
    return Outcome(refusal=str(refused.value))


BAD_CWD = {"sdk": cwd_sdk, "web": cwd_web, "acp": cwd_acp, "headless": cwd_headless, "embed": cwd_embed}
PROBLEMS = {
    "missing": "is not an existing directory",
    "file": "is not an existing directory",
    "nul": "contains a NUL character",
}
"""Every frontend gets each (a command line cannot carry a NUL, so headless gets the other two)."""


@pytest.mark.parametrize(
    ("frontend", "kind"),
    [(f, k) for f in sorted(BAD_CWD) for k in sorted(PROBLEMS) if (f, k) != ("headless", "nul")],
)
async def test_a_bad_working_directory_is_refused_where_it_enters(
    frontend: str, kind: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    bad = bad_directories(workspace)[kind]
    outcome = await BAD_CWD[frontend](tmp_path, home, Path(bad))
    assert outcome.refusal is not None and PROBLEMS[kind] in outcome.refusal, outcome.refusal
    assert "\n" not in outcome.refusal and "\0" not in outcome.refusal
    assert not (home / "sessions").exists() or not list((home / "sessions").rglob("session.v4.jsonl*"))


# -- 5b. a stored session whose workspace is gone is not resumed -----------------------------------


@run(REOPEN)
async def test_a_session_whose_workspace_is_gone_is_refused_before_any_model_call(
    frontend: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    """Resumed there, every step would note the missing directory and call the model again."""
    session_id = await stored_session(home, workspace)
    before = fe.stored_events(home, session_id)
    workspace.rename(tmp_path / "moved")
    outcome = await REOPEN[frontend](tmp_path, home, workspace)
    expected = f'session "owned" cannot be resumed: cwd {json.dumps(str(workspace))} is not an existing directory'
    assert expected in (outcome.refusal or ""), outcome.refusal
    assert fe.stored_events(home, session_id) == before


# -- 6. half an emoji in a prompt -------------------------------------------------------------------

HALF = "smile \\ud83d"
"""A prompt's text as a JSON string body: ``smile`` and the first half of a surrogate pair, alone."""


async def surrogate_sdk(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    peer = fe.sdk_session(tmp_path, home, [[{"text": "fine"}]], ws)
    try:
        raw = '{"sessionId":"s1","contentBlocks":[{"type":"text","text":"' + HALF + '"}]}'
        assert "result" in await fe.in_thread(lambda: peer.call("p", "session/prompt", raw=raw))
        await fe.in_thread(peer.idle, "s1")
    finally:
        await fe.in_thread(peer.close)
    return logged_prompt("s1", fe.stored_events(home, "s1"))


async def surrogate_web(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(page: fe.WebPage) -> Outcome:
        sid = (await page.client.post("/api/sessions", json={"cwd": str(ws)})).json()["session"]["sessionId"]
        content = '{"text":"' + HALF + '","mode":"queue"}'
        sent = await page.client.post(
            f"/api/sessions/{sid}/prompt", content=content, headers={"Content-Type": "application/json"}
        )
        assert sent.status_code == 202, sent.text
        await page.host.ctx.require(AGENTS).get(sid).when_idle()
        return logged_prompt(sid, list(page.host.ctx.require(SESSIONS).get(sid).events))

    return await fe.with_web(tmp_path, home, [[{"text": "fine"}]], ws, body)


async def surrogate_acp(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async def body(conn: Any, editor: Any) -> Outcome:
        import acp

        sid = (await conn.new_session(cwd=str(ws), mcp_servers=[])).session_id
        answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("smile \ud83d")])
        assert answer.stop_reason == "end_turn"
        return logged_prompt(sid, fe.stored_events(home, sid))

    return await fe.with_acp(tmp_path, home, [[{"text": "fine"}]], body)


async def surrogate_headless(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    task = b"smile " + b"\xed\xa0\xbd"
    done = await fe.in_thread(
        lambda: fe.headless(tmp_path, home, [[{"text": "fine"}]], "--json", "--cwd", str(ws), "-", stdin=task)
    )
    assert done.returncode == 0, done.stderr
    sid = fe.headless_final(done)["session_id"]
    return logged_prompt(sid, fe.stored_events(home, sid))


async def surrogate_embed(tmp_path: Path, home: Path, ws: Path) -> Outcome:
    async with fe.embedded([[{"text": "fine"}]], home, ws) as host:
        agent = await host.create_agent()
        result = await agent.run("smile \ud83d")
    return logged_prompt(agent.session_id, result.events)


def logged_prompt(session_id: str, events: list[dict[str, Any]]) -> Outcome:
    prompt = next(e for e in events if e["type"] == "user/message")
    ends = [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"]
    return Outcome(session_id, prompt["data"]["content"][0]["text"], ends[-1] if ends else None)


SURROGATE = {
    "sdk": surrogate_sdk,
    "web": surrogate_web,
    "acp": surrogate_acp,
    "headless": surrogate_headless,
    "embed": surrogate_embed,
}


@run(SURROGATE)
async def test_half_an_emoji_in_a_prompt_is_logged_as_a_replacement_and_the_turn_completes(
    frontend: str, tmp_path: Path, home: Path, workspace: Path
) -> None:
    outcome = await SURROGATE[frontend](tmp_path, home, workspace)
    assert outcome.final_response is not None and outcome.final_response.startswith("smile ")
    assert "\ufffd" in outcome.final_response and outcome.finish_reason == "completed"
