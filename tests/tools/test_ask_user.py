"""``ask_user_question`` and the ``user_questions`` answerer seam (spec 05 §4.12, §5.8)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from pydsh.kernel import AbortController
from pydsh.kernel.compose import SHIPPED, read_yaml_file
from pydsh.policy.keys import USER_QUESTIONS
from pydsh.policy.questions import Answer, QuestionRequest, UserQuestionError, UserQuestions
from pydsh.session.hooks import SESSION_CREATED
from tests.agent.harness import Host, start_host
from tests.subagents.helpers import calls, deleg, quiesce, result_texts, results, tool
from tests.tools.harness import harness

SCHEMA = (
    '{"name":"ask_user_question","description":"Ask the user a concise question when you need confirmation, a '
    'choice, or missing information before proceeding.","parameters":{"type":"object","properties":{"questions":'
    '{"type":"array","description":"Questions to ask the user before continuing.","items":{"type":"object",'
    '"additionalProperties":true,"properties":{"id":{"type":"string","description":"Stable id for this question; '
    'echoed in the answer."},"question":{"type":"string","description":"The specific question to ask the user."},'
    '"header":{"type":"string","description":"Optional short heading for the question, such as \\"Confirm\\" or '
    '\\"Choose Mode\\"."},"options":{"type":"array","description":"Optional choices to show the user. If you '
    'recommend one, put it first and append \\"(Recommended)\\" to that label.","items":{"type":"object",'
    '"additionalProperties":true,"properties":{"label":{"type":"string","description":"Short user-facing option '
    'label."},"description":{"type":"string","description":"One sentence explaining the tradeoff or impact."}},'
    '"required":["label"]}},"multi_select":{"type":"boolean","description":"Whether the user may select more than '
    'one option. Defaults to false."}},"required":["id","question"]}}},"required":["questions"]}}'
)
ENABLE = [{"id": "tool-ask-user", "disabled": False}]
COLOR = {
    "id": "color",
    "question": "Which colour?",
    "header": "Choose",
    "options": [{"label": "Blue (Recommended)", "description": "calm"}, {"label": "Red"}],
    "multi_select": False,
}
NAME = {"id": "name", "question": "What name?"}
ASK = calls(tool("ask_user_question", questions=[COLOR, NAME]))


def service(host: Host) -> UserQuestions:
    questions: UserQuestions = host.kernel.ctx.require(USER_QUESTIONS)
    return questions


async def ask_once(tmp_path: Path, scripts: list[Any], answerer: Any = None) -> tuple[Host, Any]:
    host = await start_host(scripts, patches=(ENABLE,))
    if answerer is not None:
        service(host).add_answerer(host.kernel.ctx, answerer)
    agent = (await host.create(tmp_path)).agent
    await host.run(agent, "go")
    await quiesce(host)
    return host, agent


async def test_schema_is_byte_exact(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("tool-ask-user", None)])
    try:
        [schema] = world.tools.schemas(None)
        assert json.dumps(schema, ensure_ascii=False, separators=(",", ":")) == SCHEMA
    finally:
        await world.close()


async def test_a_scripted_answerer_gets_the_questions_and_the_model_compact_json(tmp_path: Path) -> None:
    seen: list[QuestionRequest] = []

    async def answerer(request: QuestionRequest) -> list[Answer]:
        seen.append(request)
        return [Answer("color", ("Blue (Recommended)",)), Answer("name", (), "Ada")]

    host, agent = await ask_once(tmp_path, [ASK, {"text": "thanks"}], answerer)
    try:
        [request] = seen
        session = agent.session
        assert request.agent is agent
        assert request.call_id == results(session)[0]["message"]["toolCallId"]
        assert request.questions[0] == {
            "id": "color",
            "question": "Which colour?",
            "header": "Choose",
            "options": COLOR["options"],
            "multiSelect": False,
        }
        assert request.questions[1] == NAME
        assert result_texts(session) == [
            '{"answers":[{"id":"color","selected":["Blue (Recommended)"]},{"id":"name","selected":[],"custom":"Ada"}]}'
        ]
        assert results(session)[0]["message"].get("isError") is not True
    finally:
        await host.close()


async def test_answerers_delegate_and_unanswered_questions_count_as_skipped(tmp_path: Path) -> None:
    order: list[str] = []

    def passes(request: QuestionRequest) -> None:
        order.append("passes")

    def answers(request: QuestionRequest) -> list[Answer]:
        order.append("answers")
        return [Answer("name", (), "Bo")]

    host = await start_host([ASK, {"text": "ok"}], patches=(ENABLE,))
    try:
        service(host).add_answerer(host.kernel.ctx, passes)
        service(host).add_answerer(host.kernel.ctx, answers)
        agent = (await host.create(tmp_path)).agent
        await host.run(agent, "go")
        assert order == ["passes", "answers"]
        assert result_texts(agent.session) == [
            '{"answers":[{"id":"color","selected":[]},{"id":"name","selected":[],"custom":"Bo"}]}'
        ]
    finally:
        await host.close()


async def test_enabled_without_an_answerer_fails_with_no_provider(tmp_path: Path) -> None:
    host, agent = await ask_once(tmp_path, [ASK, {"text": "ok"}])
    try:
        assert result_texts(agent.session) == ["Error: no user-questions answerer accepted the request"]
        assert results(agent.session)[0]["error"] == {"name": "UserQuestionError", "code": "NO_PROVIDER"}
    finally:
        await host.close()


async def test_without_the_service_the_tool_fails_with_no_provider(tmp_path: Path) -> None:
    world = await harness(tmp_path, [("tools", None), ("tool-ask-user", None)])
    try:
        outcome = await world.call("ask_user_question", {"questions": [NAME]})
        assert outcome.content == [{"type": "text", "text": "Error: no user-questions answerer accepted the request"}]
        assert outcome.error == {"name": "UserQuestionError", "code": "NO_PROVIDER"}
    finally:
        await world.close()


async def test_a_delegated_child_cannot_ask(tmp_path: Path) -> None:
    asked: list[QuestionRequest] = []
    scripts = [[calls(deleg("ask them")), {"text": "ok"}, {"text": "noted"}], [ASK, {"text": "could not ask"}]]
    host = await start_host(scripts, patches=(ENABLE,))
    children: list[Any] = []
    host.kernel.ctx.on(SESSION_CREATED, lambda s: children.append(s) if s.header.get("parentSession") else None)

    def answerer(request: QuestionRequest) -> list[Answer]:
        asked.append(request)
        return []

    service(host).add_answerer(host.kernel.ctx, answerer)
    try:
        root = (await host.create(tmp_path)).agent
        await host.run(root, "go")
        await quiesce(host)
        [child] = children
        assert result_texts(child) == [
            "Error: human interaction is unavailable while the calling agent is owned by another live agent; include "
            "the unresolved question or decision in the child agent's final result"
        ]
        assert results(child)[0]["error"] == {"name": "UserQuestionError", "code": "DELEGATED_CALLER"}
        assert asked == []
    finally:
        await host.close()


async def test_a_caller_that_is_not_the_live_agent_cannot_ask(tmp_path: Path) -> None:
    host = await start_host([], patches=(ENABLE,))
    try:
        agent = (await host.create(tmp_path)).agent
        impostor = type("Impostor", (), {"id": agent.id})()
        with pytest.raises(UserQuestionError) as info:
            await service(host).ask(QuestionRequest([NAME], impostor))
        assert (info.value.message, info.value.code) == (
            "human interaction requires the exact live calling agent when an agent is supplied",
            "CALLER_NOT_LIVE",
        )
    finally:
        await host.close()


async def test_abort_ends_the_wait_with_ask_aborted(tmp_path: Path) -> None:
    host = await start_host([])
    started = asyncio.Event()

    async def never(request: QuestionRequest) -> list[Answer]:
        started.set()
        await asyncio.Event().wait()
        return []

    try:
        service(host).add_answerer(host.kernel.ctx, never)
        controller = AbortController()
        task = asyncio.create_task(service(host).ask(QuestionRequest([NAME], signal=controller.signal)))
        await started.wait()
        controller.abort("stop")
        with pytest.raises(UserQuestionError) as info:
            await task
        assert (info.value.message, info.value.code) == (
            "ask_user_question was aborted before the user answered",
            "ASK_ABORTED",
        )
        with pytest.raises(UserQuestionError, match="aborted before the user answered"):
            await service(host).ask(QuestionRequest([NAME], signal=controller.signal))
    finally:
        await host.close()


async def test_sdk_and_headless_never_advertise_it(tmp_path: Path) -> None:
    host = await start_host([{"text": "hi"}])
    try:
        agent = (await host.create(tmp_path)).agent
        events = await host.run(agent, "hi")
        [header] = [e for e in events if e["type"] == "request/header"]
        assert "ask_user_question" not in [t["name"] for t in header["data"]["header"]["tools"]]
    finally:
        await host.close()
    for template in ("sdk", "headless"):
        bundles = read_yaml_file(SHIPPED / "templates" / f"{template}.yml")["bundles"]
        rows = [r for b in bundles for op in read_yaml_file(SHIPPED / f"{b}.yml") for r in op.get("insert", [])]
        assert all(r.get("disabled") for r in rows if r["name"] == "tool-ask-user"), template


def test_a_frontend_parses_submitted_answers_against_the_questions() -> None:
    request = QuestionRequest([{"id": "color", "question": "?", "options": [{"label": "Red"}]}, NAME])
    assert request.answers_from_json({"answers": [{"id": "color", "selected": ["Red"], "custom": "dark"}]}) == [
        Answer("color", ("Red",), "dark")
    ]
    assert request.skipped() == [Answer("color"), Answer("name")]
    with pytest.raises(ValueError, match="unknown question id 'nope'"):
        request.answers_from_json({"answers": [{"id": "nope"}]})
    with pytest.raises(ValueError, match="unknown option 'Blue'"):
        request.answers_from_json({"answers": [{"id": "color", "selected": ["Blue"]}]})
    with pytest.raises(ValueError, match='"answers" array'):
        request.answers_from_json([])
