"""The terminal session driven with Textual's pilot: each test checks what is on screen (issue 25)."""

from __future__ import annotations

from typing import Any

from pydsh.apps.tui.screens import AgentTreeScreen, HelpScreen, Picker, SessionPicker
from pydsh.apps.tui.widgets import AnswerView, BlockView
from tests.apps.tui.conftest import Opener

ESCALATE = {
    "tool_calls": [
        {
            "name": "bash",
            "arguments": {
                "command": "echo escalated",
                "description": "print escalated",
                "sandbox_permissions": "danger-full-access",
                "justification": "demo of the approval panel",
            },
        }
    ]
}
ASK = {
    "tool_calls": [
        {
            "name": "ask_user_question",
            "arguments": {
                "questions": [
                    {
                        "id": "q1",
                        "header": "Choose",
                        "question": "Which colour?",
                        "options": [{"label": "Blue", "description": "Calm."}, {"label": "Red"}],
                    }
                ]
            },
        }
    ]
}


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def results(tui: Any) -> list[str]:
    return ["".join(b.get("text", "") for b in e["data"]["message"]["content"]) for e in tui.events("tool/result")]


async def test_a_prompt_streams_a_markdown_answer_under_the_session_title(tui: Opener) -> None:
    async with tui([{"text": "Here is **bold** and a list:\n\n- first item\n- second item"}]) as t:
        await t.send("say hello")
        await t.idle()
        screen = t.screen()
        assert "› say hello" in screen
        assert "Here is bold and a list:" in screen
        assert "• first item" in screen
        assert "**" not in screen
        assert screen.splitlines()[0].startswith(" pydsh  say hello")
        assert "deepseek-official/deepseek-v4-flash · workspace-write" in screen
        assert "context 1% of 128.0k" in screen


async def test_reasoning_is_folded_until_opened(tui: Opener) -> None:
    async with tui([{"reasoning": "the secret plan", "text": "Done."}]) as t:
        await t.send("think first")
        await t.idle()
        assert "Thinking (3 words)" in t.screen()
        assert "the secret plan" not in t.screen()
        view = next(v for v in t.app.views.values() if v.block.kind == "reasoning")
        view.focus()
        await t.pilot.press("enter")
        await t.shows("the secret plan")


async def test_tool_cards_summarise_each_tool_and_unfold(tui: Opener) -> None:
    script = [
        call("read", file_path="hello.txt"),
        call("edit", file_path="hello.txt", old_string="hello world", new_string="goodbye world"),
        call("bash", command="echo out; exit 3", description="fail on purpose"),
        call("grep", pattern="goodbye"),
        call("glob", pattern="*.txt"),
        call("todo_write", todos=[{"content": "write tests", "status": "in_progress"}]),
        {"text": "All done."},
    ]
    async with tui(script, size=(110, 40)) as t:
        await t.send("work")
        await t.idle()
        screen = t.screen()
        for line in (
            "✔ read  hello.txt",
            "✔ edit  hello.txt  +1 −1",
            "✘ bash  echo out; exit 3  exit 3",
            "✔ glob  *.txt  1 files",
        ):
            assert line in screen, line
        assert "✔ grep  goodbye  Found 1 match" in screen
        assert "✔ todo_write  1 items" in screen
        assert "-hello world" not in screen
        await t.pilot.press("ctrl+o")
        await t.pilot.pause()
        t.app.transcript.scroll_home(animate=False)
        await t.pilot.pause()
        await t.shows("-hello world")
        assert "+goodbye world" in t.screen()
        assert "$ echo out; exit 3" in t.screen()


async def test_an_approval_is_answered_with_keys(tui: Opener) -> None:
    async with tui([ESCALATE, {"text": "ran it"}, ESCALATE, {"text": "stopped"}]) as t:
        await t.send("run it")
        await t.shows("Allow bash?")
        assert "echo escalated" in t.screen()
        assert "[y] allow once   [n] reject   [esc] cancel" in t.screen()
        await t.pilot.press("y")
        await t.idle()
        assert "ran it" in t.screen()
        assert results(t)[0].startswith("escalated")
        await t.send("again")
        await t.shows("Allow bash?")
        await t.pilot.press("n")
        await t.idle()
        assert [e["data"]["outcome"] for e in t.events("approval/decided")] == ["allowed-once", "rejected"]
        assert "Allow bash?" not in t.screen()


async def test_a_question_is_answered_with_keys(tui: Opener) -> None:
    async with tui([ASK, {"text": "Red it is."}]) as t:
        await t.send("pick a colour")
        await t.shows("Which colour?")
        assert "Blue — Calm." in t.screen()
        await t.pilot.press("down", "enter")
        await t.idle()
        assert "Red it is." in t.screen()
        assert '"selected": ["Red"]' in results(t)[0] or '"Red"' in results(t)[0]


async def test_esc_stops_the_running_turn(tui: Opener) -> None:
    async with tui([{"hang": True}]) as t:
        await t.send("take forever")
        await t.until(lambda: t.app.running, "the turn to run")
        assert "● running" in t.screen()
        await t.pilot.press("escape")
        await t.idle()
        await t.shows("Stopped.")
        assert t.events("turn/end")[-1]["data"]["reason"]["kind"] == "aborted"
        assert "○ idle" in t.screen()


async def test_a_prompt_sent_while_the_agent_works_is_queued_then_runs(tui: Opener, tmp_path: Any) -> None:
    script = [call("bash", command="sleep 3", description="wait"), {"text": "first done"}, {"text": "second done"}]
    async with tui(script) as t:
        await t.send("first")
        await t.until(lambda: t.app.running, "the turn to run")
        await t.send("second")
        await t.shows("⧗ queued: second")
        await t.until(lambda: not t.app.running and "second done" in t.screen(), "the queued prompt's answer")
        assert t.screen().index("first done") < t.screen().index("› second")


async def test_ctrl_s_steers_into_the_running_turn(tui: Opener) -> None:
    script = [call("bash", command="sleep 3", description="wait"), {"text": "steered"}]
    async with tui(script) as t:
        await t.send("first")
        await t.until(lambda: t.app.running, "the turn to run")
        await t.send("also do this", key="ctrl+s")
        await t.idle()
        starts = t.events("turn/start")
        assert len(starts) == 1
        assert "› also do this" in t.screen()
        assert "steered" in t.screen()


async def test_slash_commands_complete_and_run(tui: Opener) -> None:
    async with tui([{"text": "hi"}]) as t:
        await t.type("/he")
        await t.shows("/help  keys and commands")
        await t.pilot.press("tab")
        assert t.app.prompt.text == "/help"
        await t.pilot.press("enter")
        await t.until(lambda: isinstance(t.app.screen, HelpScreen), "the help")
        assert "Ctrl+S" in t.screen() and "/resume" in t.screen()
        await t.pilot.press("escape")
        await t.send("/mode read-only")
        await t.shows("· read-only")
        assert t.events("permission/preset")[-1]["data"]["preset"] == "read-only"
        await t.pilot.press("shift+tab")
        await t.shows("· workspace-write")
        await t.send("/compact")
        await t.idle()
        await t.shows("/compact: nothing to compact")


async def test_at_completes_a_file_path(tui: Opener) -> None:
    async with tui([{"text": "hi"}]) as t:
        await t.type("look at @hel")
        await t.shows("hello.txt")
        await t.pilot.press("tab")
        assert t.app.prompt.text == "look at hello.txt "


async def test_history_and_multi_line_input(tui: Opener) -> None:
    async with tui([{"text": "one"}, {"text": "two"}]) as t:
        await t.send("line one\nline two")
        await t.idle()
        assert "› line one\nline two" in t.screen() or "line two" in t.screen()
        assert t.events("user/message")[0]["data"]["content"][0]["text"] == "line one\nline two"
        await t.pilot.press("up")
        assert t.app.prompt.text == "line one\nline two"


async def test_resume_picker_opens_a_stored_session(tui: Opener) -> None:
    async with tui([{"text": "answer of the first"}, {"text": "fresh"}]) as t:
        await t.send("the first session")
        await t.idle()
        first = t.controller.live.session_id
        await t.send("/new")
        await t.until(lambda: t.controller.agent is not None and t.controller.live.session_id != first, "a new session")
        await t.until(lambda: "the first session" not in t.screen(), "a clean transcript")
        await t.send("/resume")
        await t.until(lambda: isinstance(t.app.screen, SessionPicker), "the picker")
        await t.shows("the first session")
        await t.pilot.press("down", "enter")
        await t.until(lambda: t.controller.live.session_id == first, "the resumed session")
        await t.shows("answer of the first")


async def test_agent_tree_names_members_and_opens_their_session(tui: Opener) -> None:
    delegate = call("subagent", description="scan the repo", prompt="scan the repo", name="scanner")
    async with tui([[delegate, {"text": "Delegated."}], [{"text": "Scanned it all."}]]) as t:
        await t.send("delegate a scan")
        await t.idle()
        await t.pilot.press("ctrl+t")
        await t.until(lambda: isinstance(t.app.screen, AgentTreeScreen), "the tree")
        await t.shows("scanner")
        assert "lead" in t.screen()
        await t.pilot.press("down", "enter")
        await t.shows("Scanned it all.")
        assert "viewing scanner" in t.screen()
        assert t.app.prompt.disabled
        await t.pilot.press("escape")
        await t.shows("Delegated.")
        assert not t.app.prompt.disabled


async def test_copy_sends_the_last_answer_to_the_clipboard(tui: Opener) -> None:
    async with tui([{"text": "copy **me**"}]) as t:
        await t.send("answer")
        await t.idle()
        await t.send("/copy")
        assert t.app.clipboard == "copy **me**"


async def test_a_burst_of_updates_shows_a_running_list_then_its_newest_cards(tui: Opener) -> None:
    """More new blocks in one tick than a screen shows: one list line per block instead of a card each, then the
    newest cards once the stream is quiet (the events are fed the way the kernel hands them to the screen)."""
    async with tui([{"text": "ready"}]) as t:
        await t.send("start")
        await t.idle()
        session = t.controller.live.session
        seq = session.seq + 1
        for i in range(120):
            data = {
                "turn": 9,
                "step": 1,
                "callId": f"burst-{i}",
                "name": "glob",
                "arguments": f'{{"pattern": "*{i}.md"}}',
            }
            t.controller._on_event(session, {"type": "tool/call", "seq": seq + i, "time": 0, "data": data})
        await t.shows("⋯ 120 new items, the newest:")
        assert "… glob  *119.md  running" in t.screen()
        await t.until(lambda: not t.app.main.query_one("#burst").display, "the burst to end")
        await t.shows("… glob  *119.md  running")
        await t.until(
            lambda: len(t.app.views) > 2, "the newest cards to be mounted"
        )  # the list line shows that text too
        assert len(t.app.views) == 60
        assert t.app.first == len(t.app.feed.blocks) - 60


def tool_call(session: Any, seq: int, i: int) -> dict[str, Any]:
    """A ``tool/call`` event of the open session, as the kernel logs it."""
    data = {"turn": 9, "step": 1, "callId": f"call-{i}", "name": "glob", "arguments": f'{{"pattern": "*{i}.md"}}'}
    return {"type": "tool/call", "seq": seq, "time": 0, "data": data}


async def test_cards_arriving_tick_after_tick_while_running_are_mounted_together_none_lost_or_twice(
    tui: Opener,
) -> None:
    """While a turn runs, a few new cards per tick wait and are mounted in one go (each mount lays out every
    card on screen); every block ends up mounted exactly once, in order."""
    async with tui([{"text": "ready"}]) as t:
        await t.send("start")
        await t.idle()
        session = t.controller.live.session
        seq = session.seq + 1
        t.app.running = True
        mounts = 0
        mount_all = t.app.transcript.mount_all

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal mounts
            mounts += 1
            return mount_all(*args, **kwargs)

        t.app.transcript.mount_all = counted  # type: ignore[method-assign]
        for i in range(40):
            t.controller._on_event(session, tool_call(session, seq + i, i))
            if i % 3 == 2:
                await t.pilot.pause(0.06)
        t.app.running = False
        await t.shows("glob  *39.md")
        shown = [view.block.key for view in t.app.transcript.children if isinstance(view, BlockView | AnswerView)]
        assert shown == [block.key for block in t.app.feed.blocks[t.app.first :]]
        assert shown[-40:] == [f"ccall-{i}" for i in range(40)]
        assert not t.app.pending
        assert mounts < 13


async def test_an_80_by_24_terminal_shows_the_title_the_answer_the_prompt_and_the_usage_line(tui: Opener) -> None:
    async with tui([{"text": "Small screens work."}], size=(80, 24)) as t:
        await t.send("hello")
        await t.idle()
        await t.shows("Small screens work.")
        lines = t.screen().splitlines()
        assert len(lines) == 24 and all(len(line) == 80 for line in lines)
        assert lines[0].startswith(" pydsh  hello")
        assert "Ask anything" in "\n".join(lines[-4:])
        assert lines[-1].startswith(" ○ idle  deepseek-official/deepseek-v4-flash · workspace-write")


TWO_MODELS = [
    {
        "id": "deepseek-official",
        "name": "scripted",
        "models": [
            {"id": "deepseek-v4-flash", "contextWindow": 128000},
            {"id": "deepseek-v4-pro", "contextWindow": 128000, "reasoningEfforts": ["low", "high"]},
        ],
    }
]


def request_configs(tui: Any) -> list[dict[str, Any]]:
    return [e["data"]["header"]["config"] for e in tui.events("request/header")]


async def test_model_picker_routes_the_next_turn_and_the_usage_line_names_it(tui: Opener) -> None:
    async with tui([{"text": "first"}, {"text": "second"}], providers=TWO_MODELS) as t:
        await t.send("hello")
        await t.idle()
        assert request_configs(t)[-1]["model"] == "deepseek-v4-flash"
        await t.send("/model")
        await t.until(lambda: isinstance(t.app.screen, Picker), "the model picker")
        assert "deepseek-official/deepseek-v4-pro" in t.screen()
        await t.pilot.press("down", "enter")
        await t.shows("deepseek-official/deepseek-v4-pro")
        await t.send("again")
        await t.idle()
        assert request_configs(t)[-1]["model"] == "deepseek-v4-pro"


async def test_model_and_effort_commands_check_what_they_are_given(tui: Opener) -> None:
    async with tui([{"text": "done"}], providers=TWO_MODELS) as t:
        await t.send("/model deepseek-v4-pro")
        await t.notified("give the model as PROVIDER/MODEL")
        await t.send("/model deepseek-official/deepseek-v4-pro")
        await t.shows("deepseek-official/deepseek-v4-pro")
        await t.send("/effort")
        await t.notified("Efforts of deepseek-v4-pro: low, high")
        await t.send("/effort high")
        await t.shows("deepseek-v4-pro (high)")
        await t.send("go")
        await t.idle()
        config = request_configs(t)[-1]
        assert (config["model"], config["reasoningEffort"]) == ("deepseek-v4-pro", "high")


async def test_the_screen_reflows_when_the_terminal_is_resized(tui: Opener) -> None:
    async with tui([{"text": "A reply long enough to wrap once the terminal narrows to sixty columns."}]) as t:
        await t.send("hello")
        await t.idle()
        await t.shows("A reply long enough")
        for width, height in ((60, 20), (140, 40)):
            await t.pilot.resize_terminal(width, height)
            await t.pilot.pause(0.2)
            lines = t.screen().splitlines()
            assert len(lines) == height and all(len(line) == width for line in lines)
            assert lines[0].startswith(" pydsh  hello")
            assert "Ask anything" in "\n".join(lines[-4:])
            assert lines[-1].startswith(" ○ idle")
            assert "sixty columns." in " ".join(line.strip(" │") for line in lines)


def test_the_title_writes_the_home_as_a_tilde(monkeypatch: Any) -> None:
    from pydsh.apps.tui.app import home_relative

    monkeypatch.setenv("HOME", "/home/ada")
    assert home_relative("/home/ada/greet") == "~/greet"
    assert home_relative("/home/ada") == "~"
    assert home_relative("/home/adam/greet") == "/home/adam/greet"
    assert home_relative("/srv/greet") == "/srv/greet"


async def test_a_folded_tool_card_stays_one_line_however_long_its_subject(tui: Opener) -> None:
    command = "echo " + " ".join(f"word{i}" for i in range(40))
    async with tui([call("bash", command=command, description="long"), {"text": "Echoed."}], size=(50, 24)) as t:
        await t.send("echo a lot")
        await t.idle()
        await t.shows("Echoed.")
        lines = [line for line in t.screen().splitlines() if "bash  echo word0" in line]
        assert len(lines) == 1 and lines[0].rstrip().endswith("…"), lines
        assert "word39" not in t.screen()


async def test_goal_and_plan_commands_answer_in_a_notification(tui: Opener) -> None:
    async with tui([{"text": "ready"}]) as t:
        await t.send("hi")
        await t.idle()
        await t.send("/goal")
        await t.notified("No goal is currently set.\nUsage: /goal [<objective>|clear|edit <objective>|pause|resume]")
        await t.send("/plan")
        await t.notified("Plan mode on. Use /plan off to leave.")
        await t.send("/plan off")
        await t.notified("Plan mode off.")
        records = [e["data"] for e in t.controller.live.session.events if e["type"] == "plan/mode"]
        assert records == [{"active": True}, {"active": False}]
