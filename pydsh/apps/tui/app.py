"""The terminal screen: the transcript of the open session, the prompt, and what waits for the user.

Updates from the controller are drained on a 50 ms timer and applied as one batch (one layout per tick),
the transcript mounts only its tail (earlier blocks load when the user scrolls to the top) and keeps at
most :data:`MAX_MOUNTED` blocks, so long sessions and very busy turns leave the prompt responsive.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static, TextArea
from textual.widgets.option_list import Option

from pydsh.apps.tui import cards
from pydsh.apps.tui.cards import subject
from pydsh.apps.tui.commands import COMMANDS, Completion, FileIndex, command_completions
from pydsh.apps.tui.feed import Block, Feed, parse_arguments
from pydsh.apps.tui.widgets import (
    AskPanel,
    BlockView,
    CompletionList,
    Lines,
    PromptArea,
    QuestionPanel,
    View,
    view_of,
)
from pydsh.host import HostError

if TYPE_CHECKING:
    from pydsh.apps.tui.controller import Ask, Controller, Preview, Questions

TICK_S = 0.05
TAIL = 60
"""Blocks a resumed session shows at first (its last turn, up to this many)."""
PAGE = 50
"""Blocks loaded at once when the user scrolls above the first one shown."""
MAX_MOUNTED = 150
"""Blocks kept on screen while a turn streams; older ones leave (and load again on scroll-up)."""
QUIT_WINDOW_S = 3.0
BUSY = 8
"""New blocks in one tick beyond which the transcript shows a burst list instead of mounting cards."""
BURST_LINES = 12
QUIET_S = 0.5
"""A burst ends once no update came for this long; then the newest blocks are mounted as cards."""
CHROME_S = 0.25
"""How often the title, activity and usage lines are redrawn while events arrive."""
MOUNT_S = 0.25
"""While a turn runs, new cards are mounted together at most this often: a mount lays out every card mounted
(twice), and a keystroke arriving meanwhile is echoed only once that is done."""
ASK = "Ask anything · / for commands · @ for files"
"""The prompt's placeholder."""


class Transcript(VerticalScroll):
    """The scrolling transcript; reaching the top asks for earlier blocks."""

    class Top(Message):
        """The user scrolled to the top."""

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new <= 0 < old:
            self.post_message(self.Top())


class PydshTui(App[int]):
    """``pydsh tui``: one root session at a time, driven from the keyboard."""

    TITLE = "pydsh"
    CSS_PATH = "tui.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "Stop / quit", priority=True),
        Binding("escape", "stop", "Stop", show=False),
        Binding("shift+tab", "next_mode", "Mode", priority=True, show=False),
        Binding("ctrl+o", "fold_all", "Fold", show=False),
        Binding("ctrl+t", "agents", "Agents", show=False),
        Binding("pageup", "page_up", show=False),
        Binding("pagedown", "page_down", show=False),
    ]

    controller: Controller
    """The session's controller (set once it is open: see :attr:`opened`)."""

    def __init__(
        self, session: Controller | Callable[[], Awaitable[Controller | None]], preview: Preview | None = None
    ) -> None:
        """``session``: an open controller, or how to open one behind the first frame (``None``: it could
        not be opened, and the screen ends); ``preview``: the last events of the session being opened, shown
        meanwhile."""
        super().__init__()
        self.preview = preview
        self.opener = session if callable(session) else None
        if not callable(session):
            self.controller = session
        self.opened = asyncio.Event()
        """Set once the session is open: before, the screen's keys other than Ctrl+C do nothing (typing works)."""
        self.early: list[PromptArea.Submitted] = []
        """Prompts sent before the session was open: sent once it is."""
        self.feed = Feed()
        self.viewing = ""
        self.views: dict[str, View] = {}
        self.first = 0
        self.running = False
        self.asks: deque[Ask] = deque()
        self.questions: deque[Questions] = deque()
        self.activity: dict[str, str] = {}
        self.completions: list[Completion] = []
        self.files: FileIndex | None = None
        self.armed_quit = 0.0
        self.chrome_at = 0.0
        self.chrome_dirty = False
        self.burst_since: int | None = None
        """Index of the first block of a burst not mounted as cards (``None``: no burst)."""
        self.burst_at = 0.0
        self.pending: dict[str, Block] = {}
        """New blocks waiting for the next mount (see :data:`MOUNT_S`), by key."""
        self.mounted_at = 0.0
        self.painted = 0.0
        """When the first frame was drawn (``time.perf_counter``), for the bench."""
        self._transcript = Transcript(id="transcript")

    # -- layout -----------------------------------------------------------------------------------

    def compose(self) -> Any:
        yield Static(id="title")
        yield self._transcript
        yield Lines(id="burst")
        yield Lines(id="activity")
        yield AskPanel(id="ask")
        yield QuestionPanel(id="questions")
        yield CompletionList(id="completions")
        yield PromptArea(id="prompt", placeholder=ASK)
        yield Static(id="status")

    @property
    def main(self) -> Screen[Any]:
        """The screen of the session (queries must not reach a dialog pushed over it)."""
        return self.screen_stack[0]

    @property
    def alive(self) -> bool:
        """Whether the session screen is still up (timers and workers may fire while it is torn down); no query,
        since every tick asks."""
        return bool(self.screen_stack) and self._transcript.is_attached

    @property
    def prompt(self) -> PromptArea:
        return self.main.query_one(PromptArea)

    @property
    def transcript(self) -> Transcript:
        return self._transcript

    async def on_mount(self) -> None:
        for name in ("ask", "questions", "completions", "activity", "burst"):
            self.main.query_one(f"#{name}").display = False
        self.prompt.focus()
        self.call_after_refresh(self._painted)
        if self.opener is None:
            await self._show_opened()
            return
        doing = "  starting…" if self.preview is None else "  resuming…"
        self.main.query_one("#title", Static).update(Text.assemble((" pydsh ", "bold reverse"), doing))
        if self.preview is None:
            self.call_after_refresh(self._start_opening)
            return
        self.viewing = self.preview.session_id
        await self._show_feed(self.preview.events)
        self.call_after_refresh(lambda: self.call_after_refresh(self._start_opening))

    def _start_opening(self) -> None:
        """Open the session once the first frame is out (a preview takes a second refresh: its scroll to the
        end lands after the first layout); the open holds the event loop for a while."""
        self.run_worker(self._open(), exclusive=True)

    async def _open(self) -> None:
        """Open the session behind the first frame; a session that cannot be opened ends the screen."""
        assert self.opener is not None
        controller = await self.opener()
        if controller is None:
            self.exit(return_code=1)
            return
        self.controller = controller
        await self._show_opened()

    async def _show_opened(self) -> None:
        self.controller.wake = lambda: None
        self.files = FileIndex(self.controller.workspace())
        await self.show_session(self.controller.live.session_id)
        self.set_interval(TICK_S, self.flush)
        self.opened.set()
        for message in self.early:
            self.post_message(message)
        self.early.clear()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Until the session is open, of the screen's keys only Ctrl+C works (it quits)."""
        return self.opened.is_set() or action == "interrupt"

    def _painted(self) -> None:
        self.painted = time.perf_counter()

    # -- the transcript ---------------------------------------------------------------------------

    async def show_session(self, session_id: str) -> None:
        """Show ``session_id`` (the root, or a member read only) from its tail."""
        session = await self.controller.read(session_id)
        previewed = self.viewing == session_id and not self.opened.is_set()
        self.viewing = session_id
        await self._show_feed(list(session.events), adopt=previewed)
        member = session_id != self.controller.live.session_id
        self.prompt.disabled = member
        self.prompt.placeholder = "Viewing a member's session (read only) — Esc returns" if member else ASK
        self.running = self.controller.status(self.controller.live.session_id) == "running"
        self.refresh_chrome(metered=False)
        self.call_after_refresh(self.refresh_chrome)

    async def _show_feed(self, events: list[dict[str, Any]], adopt: bool = False) -> None:
        """The transcript of ``events`` from its last turn; ``adopt``: the cards shown (the preview of the same
        session) are kept where they are when the full transcript holds them in the same order."""
        feed = Feed()
        feed.apply_all(events)
        if adopt and self._adopt(feed):
            return
        self.feed = feed
        await self.transcript.remove_children()
        self.views = {}
        self.pending = {}
        blocks = feed.blocks
        last_prompt = max((i for i, b in enumerate(blocks) if b.kind == "user"), default=0)
        self.first = max(0, len(blocks) - TAIL, min(last_prompt, len(blocks) - 1) if len(blocks) > TAIL else 0)
        await self._mount(blocks[self.first :])
        self.transcript.scroll_end(animate=False)

    def _adopt(self, feed: Feed) -> bool:
        """Switch from the preview to the full transcript without redrawing: each card shown takes the full
        fold's block of its key, and blocks the preview did not have are mounted after (``False``: the cards
        shown are not a run of the full transcript)."""
        shown = [block.key for block in self.feed.blocks[self.first :]]
        keys = [block.key for block in feed.blocks]
        first = keys.index(shown[0]) if shown and shown[0] in keys else -1
        if first < 0 or keys[first : first + len(shown)] != shown or self.pending:
            return False
        for key, block in zip(shown, feed.blocks[first : first + len(shown)], strict=True):
            view = self.views[key]
            view.block = block
            view.refresh_block()
        self.feed = feed
        self.first = first
        self.pending = {b.key: b for b in feed.blocks[first + len(shown) :]}
        self._mount_pending()
        return True

    async def _mount(self, blocks: list[Block], before: View | None = None) -> None:
        views = [view_of(b) for b in blocks]
        for view in views:
            self.views[view.block.key] = view
        if views:
            await self.transcript.mount_all(views, before=before)

    @on(Transcript.Top)
    async def load_earlier(self) -> None:
        """Mount the page of blocks above the first one shown, keeping the view where it was."""
        if self.first == 0:
            return
        start = max(0, self.first - PAGE)
        anchor = self.views.get(self.feed.blocks[self.first].key)
        await self._mount(self.feed.blocks[start : self.first], before=anchor)
        self.first = start
        if anchor is not None:
            self.transcript.scroll_to_widget(anchor, animate=False, top=True)

    async def flush(self) -> None:
        """Apply what happened since the last tick as one batch (nothing once the screen is torn down)."""
        if not self.alive:
            return
        updates = self.controller.drain()
        if not updates:
            if self.burst_since is not None and time.monotonic() - self.burst_at > QUIET_S:
                await self._end_burst()
            self._mount_pending()
            if self.chrome_dirty:
                self.refresh_chrome()
            return
        changed: dict[str, Block] = {}
        root = self.controller.live.session_id
        for kind, payload in updates:
            if kind == "event":
                sid, event = payload
                if sid == self.viewing:
                    changed.update((b.key, b) for b in self.feed.apply(event))
                if sid != root:
                    self._member_event(sid, event)
            elif kind == "delta" and payload[0] == self.viewing:
                changed.update((b.key, b) for b in self.feed.delta(payload[1], payload[2]))
            elif kind == "status":
                self._status(*payload)
            elif kind == "ask":
                self.asks.append(payload)
            elif kind == "questions":
                self.questions.append(payload)
        self._apply(changed)
        self._next_wait()
        self.chrome_dirty = True
        if time.monotonic() - self.chrome_at >= CHROME_S:
            self.refresh_chrome()

    def _apply(self, changed: dict[str, Block]) -> None:
        if not changed:
            return
        follow = self.following
        new = [b for key, b in changed.items() if key not in self.views and key not in self.pending]
        for key in changed:
            view = self.views.get(key)
            if view is not None and view.is_mounted:
                view.refresh_block()
        if new and (self.burst_since is not None or len(new) > BUSY):
            self._burst(new)
        elif new:
            self.pending.update((b.key, b) for b in new)
            self._mount_pending()
        if follow:
            self.transcript.scroll_end(animate=False)

    @property
    def following(self) -> bool:
        """Whether the transcript is scrolled to its end (new blocks then keep it there)."""
        return self.transcript.scroll_y >= self.transcript.max_scroll_y - 2

    def _mount_pending(self) -> None:
        """Mount the waiting blocks as cards in one go: at once when idle, else at most every :data:`MOUNT_S`."""
        now = time.monotonic()
        if not self.pending or (self.running and now - self.mounted_at < MOUNT_S):
            return
        follow = self.following
        views = [view_of(b) for b in self.pending.values()]
        self.pending = {}
        self.mounted_at = now
        for view in views:
            self.views[view.block.key] = view
        self.transcript.mount_all(views)
        self._trim()
        if follow:
            self.transcript.scroll_end(animate=False)

    def _burst(self, new: list[Block]) -> None:
        """Blocks arriving faster than cards can be mounted: one line-list of the newest instead (one widget
        redrawn per tick), until the stream calms down."""
        now = time.monotonic()
        if self.burst_since is None:
            first = next(iter(self.pending.values()), new[0])
            self.burst_since = self.feed.blocks.index(first)
            self.pending = {}
        self.burst_at = now
        waiting = self.feed.blocks[self.burst_since :]
        text = Text(f"⋯ {len(waiting)} new items, the newest:\n", style="dim")
        for block in waiting[-BURST_LINES:]:
            text.append_text(cards.headline(block, False) if block.kind == "tool" else Text(block.text[:90]))
            text.append("\n")
        text.rstrip()
        live = self.main.query_one("#burst", Lines)
        live.show(text)
        live.display = True

    async def _end_burst(self) -> None:
        """The stream calmed down: show the newest blocks as cards again."""
        self.burst_since = None
        self.main.query_one("#burst", Static).display = False
        await self._jump(max(0, len(self.feed.blocks) - TAIL))
        self.transcript.scroll_end(animate=False)

    async def _jump(self, first: int) -> None:
        """A burst larger than one screen: show only the newest blocks (the rest load on scroll-up)."""
        await self.transcript.remove_children(list(self.views.values()))
        self.views = {}
        self.pending = {}
        self.first = first
        await self._mount(self.feed.blocks[first:])

    def _trim(self) -> None:
        """Unmount the oldest blocks beyond :data:`MAX_MOUNTED` (they load again on scroll-up)."""
        excess = len(self.views) - MAX_MOUNTED
        if excess <= 0:
            return
        gone = self.feed.blocks[self.first : self.first + excess]
        self.first += excess
        widgets = [self.views.pop(b.key) for b in gone if b.key in self.views]
        self.transcript.remove_children(widgets)

    def _member_event(self, sid: str, event: dict[str, Any]) -> None:
        """A member's latest tool call, shown with its name while it runs."""
        if event["type"] == "tool/call":
            block = Block(
                "", "tool", title=str(event["data"]["name"]), arguments=parse_arguments(event["data"]["arguments"])
            )
            self.activity[sid] = f"{block.title} {subject(block)}".strip()
            self._learn_name(sid)

    def _status(self, sid: str, status: str) -> None:
        if sid == self.controller.live.session_id:
            self.running = status == "running"
        elif status == "running":
            self.activity.setdefault(sid, "working")
            self._learn_name(sid)
        else:
            self.activity.pop(sid, None)

    @work(exclusive=False)
    async def _learn_name(self, sid: str) -> None:
        if sid not in self.controller.names:
            await self.controller.name(sid)
            self.refresh_chrome()

    def refresh_chrome(self, metered: bool = True) -> None:
        """Title, member activity, queue and the usage line (``metered=False``: without the token meter's
        figures, which fold every event of the session: a resumed long session shows its transcript first)."""
        if not self.alive:
            return
        self.chrome_at = time.monotonic()
        self.chrome_dirty = False
        controller = self.controller
        session = controller.live.session
        title = Text()
        title.append(" pydsh ", style="bold reverse")
        title.append(f" {controller.title(session)}", style="bold")
        if self.viewing != session.id:
            title.append(f"  viewing {controller.names.get(self.viewing, self.viewing[:8])}", style="bold reverse")
        title.append(f"  {home_relative(controller.workspace())}", style="dim")
        self.main.query_one("#title", Static).update(title, layout=False)
        activity = self.main.query_one("#activity", Lines)
        for sid in [sid for sid in self.activity if controller.status(sid) != "running"]:
            del self.activity[sid]
        lines = [f"● {controller.names.get(sid, sid[:8])} · {what}" for sid, what in self.activity.items()]
        queued = [f"⧗ {'steer' if mode == 'steer' else 'queued'}: {text}" for mode, text in controller.queued()]
        activity.show(Text("\n".join(lines + queued)))
        activity.display = bool(lines or queued)
        self.main.query_one("#status", Static).update(self._usage_line(metered), layout=False)

    def _usage_line(self, metered: bool) -> Text:
        controller = self.controller
        route = controller.route()
        meter = controller.meter(controller.live.session) if metered else {}
        line = Text()
        line.append("● running " if self.running else "○ idle ", style="bold yellow" if self.running else "dim")
        effort = f" ({route['reasoningEffort']})" if route.get("reasoningEffort") else ""
        line.append(f" {route.get('provider')}/{route.get('model')}{effort}")
        line.append(f" · {controller.mode()}", style="bold")
        usage = meter.get("tokenUsage") or {}
        if usage:
            sent = (
                usage.get("uncachedInputTokens", 0) + usage.get("cacheReadTokens", 0) + usage.get("cacheWriteTokens", 0)
            )
            line.append(f" · ↑{_tokens(sent)} ↓{_tokens(usage.get('outputTokens', 0))}")
        pressure = meter.get("contextPressure") or {}
        window, used = pressure.get("contextWindow"), pressure.get("projectedTokens")
        if window and used is not None:
            percent = round(100 * used / window)
            line.append(f" · context {percent}% of {_tokens(window)}", style="bold red" if percent >= 80 else "")
        hint = "  Esc stops" if self.running else "  /help"
        line.append(hint, style="dim")
        return line

    # -- approvals and questions ------------------------------------------------------------------

    def _next_wait(self) -> None:
        """Show the first approval or question still waiting, if the panels are free."""
        panel = self.main.query_one(AskPanel)
        questions = self.main.query_one(QuestionPanel)
        if panel.display or questions.display:
            return
        while self.asks and self.asks[0].future.done():
            self.asks.popleft()
        while self.questions and self.questions[0].future.done():
            self.questions.popleft()
        if self.asks:
            panel.show(self.asks[0])
            panel.display = True
            panel.focus()
        elif self.questions:
            questions.display = True
            questions.start(self.questions[0])

    @on(AskPanel.Answered)
    def answered(self, message: AskPanel.Answered) -> None:
        ask = self.asks.popleft()
        if not ask.future.done():
            ask.future.set_result(message.outcome)
        self.main.query_one(AskPanel).display = False
        self.prompt.focus()
        self._next_wait()

    @on(QuestionPanel.Answered)
    def questions_answered(self, message: QuestionPanel.Answered) -> None:
        pending = self.questions.popleft()
        if not pending.future.done():
            pending.future.set_result(message.answers)
        self.main.query_one(QuestionPanel).display = False
        self.prompt.focus()
        self._next_wait()

    # -- the prompt -------------------------------------------------------------------------------

    @on(PromptArea.Submitted)
    async def submitted(self, message: PromptArea.Submitted) -> None:
        if not self.opened.is_set():
            self.early.append(message)
            return
        self._hide_completions()
        text = message.text.strip()
        word, _, rest = text.partition(" ")
        if word in COMMANDS and word != "/compact":
            await self.command(word, rest.strip())
            return
        if text.startswith("/") and " " not in text and word not in COMMANDS and word not in self.prompt_commands():
            self.notify(f"Unknown command {word} — /help lists them", severity="warning")
            return
        try:
            await self.controller.send(message.text, steer=message.steer and self.running)
        except HostError as exc:
            self.notify(str(exc), severity="error")
        self.refresh_chrome()

    async def command(self, name: str, arg: str) -> None:
        """Run a ``/`` command."""
        handler = getattr(self, f"cmd_{name[1:]}")
        try:
            await handler(arg)
        except (HostError, ValueError) as exc:
            self.notify(str(exc), severity="error")

    async def cmd_help(self, arg: str) -> None:
        from pydsh.apps.tui.screens import HelpScreen  # the dialogs load when first opened

        self.push_screen(HelpScreen(self.prompt_commands()))

    async def cmd_new(self, arg: str) -> None:
        await self._switch(None)

    async def cmd_resume(self, arg: str) -> None:
        if arg:
            await self._switch(arg)
            return
        rows = await self.controller.recent()
        from pydsh.apps.tui.screens import SessionPicker

        self.push_screen(SessionPicker(rows), self._resume_chosen)

    async def _resume_chosen(self, session_id: str | None) -> None:
        if session_id:
            await self._switch(session_id)

    async def _switch(self, session_id: str | None) -> None:
        agent = await self.controller.switch(session_id)
        self.activity.clear()
        self.files = FileIndex(self.controller.workspace())
        await self.show_session(agent.session_id)
        self.notify(f"Resumed {self.controller.title(agent.session)}" if session_id else "New session")

    async def cmd_model(self, arg: str) -> None:
        if arg:
            provider, _, model = arg.partition("/")
            if not model:
                raise ValueError("give the model as PROVIDER/MODEL")
            await self.controller.set_route(provider, model)
            return
        models = await self.controller.models()
        options = [Option(f"{p}/{m}", id=f"{p}/{m}") for p, m, _efforts in models]
        from pydsh.apps.tui.screens import Picker

        self.push_screen(Picker("Model", options), self._model_chosen)

    async def _model_chosen(self, choice: str | None) -> None:
        if choice:
            await self.command("/model", choice)

    async def cmd_effort(self, arg: str) -> None:
        route = self.controller.route()
        if not arg:
            efforts = next(
                (e for p, m, e in await self.controller.models() if (p, m) == (route["provider"], route["model"])), []
            )
            self.notify(f"Efforts of {route['model']}: {', '.join(efforts) or 'none'} — /effort LEVEL", timeout=6)
            return
        await self.controller.set_route(route["provider"], route["model"], arg)

    async def cmd_mode(self, arg: str) -> None:
        from pydsh.apps.tui.controller import MODES

        if arg and arg not in MODES:
            raise ValueError(f"unknown mode {arg}; one of {', '.join(MODES)}")
        mode = self.controller.set_mode(arg) if arg else self.controller.next_mode()
        self.notify(f"Permission mode: {mode}")
        self.refresh_chrome()

    async def cmd_goal(self, arg: str) -> None:
        self._answer(self.controller.goal(arg))

    async def cmd_plan(self, arg: str) -> None:
        self._answer(self.controller.plan(arg))
        self.refresh_chrome()

    def _answer(self, answer: dict[str, str]) -> None:
        """Show a command's answer: an error as one, anything else as information."""
        self.notify(answer["text"], severity="error" if answer["kind"] == "error" else "information")

    async def cmd_agents(self, arg: str) -> None:
        from pydsh.apps.tui.screens import AgentTreeScreen

        self.push_screen(AgentTreeScreen(await self.controller.tree()), self._agent_chosen)

    async def _agent_chosen(self, session_id: str | None) -> None:
        if session_id and session_id != self.viewing:
            await self.controller.name(session_id)
            await self.show_session(session_id)

    async def cmd_copy(self, arg: str) -> None:
        answer = self.controller.last_answer()
        if not answer:
            self.notify("No answer to copy yet", severity="warning")
            return
        self.copy_to_clipboard(answer)
        self.notify("Copied the last answer")

    async def cmd_quit(self, arg: str) -> None:
        await self.action_quit_app()

    # -- completion -------------------------------------------------------------------------------

    def prompt_commands(self) -> dict[str, str]:
        """The composition's MCP prompt commands, sent as prompts like ``/compact``."""
        return self.controller.host.prompt_commands()

    @on(TextArea.Changed, "#prompt")
    def prompt_changed(self) -> None:
        if self.files is None:
            return
        prompt = self.prompt
        row, column = prompt.cursor_location
        line = prompt.document.get_line(row)
        typed = line[:column]
        found = [c for c in command_completions(typed, self.prompt_commands()) if c.value != typed] if row == 0 else []
        if not found:
            found = self.files.complete(line, column)
        self.completions = found
        listing = self.main.query_one(CompletionList)
        if not found:
            self._hide_completions()
            return
        listing.clear_options()
        listing.add_options([Option(Text.assemble((c.value, "bold"), f"  {c.help}" if c.help else "")) for c in found])
        listing.highlighted = 0
        listing.display = True
        prompt.completing = True

    def _hide_completions(self) -> None:
        self.main.query_one(CompletionList).display = False
        self.prompt.completing = False
        self.completions = []

    @on(PromptArea.Navigate)
    def navigate(self, message: PromptArea.Navigate) -> None:
        listing = self.main.query_one(CompletionList)
        if message.key == "escape":
            self._hide_completions()
        elif message.key in ("up", "down"):
            listing.action_cursor_up() if message.key == "up" else listing.action_cursor_down()
        elif listing.highlighted is not None:
            self._complete(self.completions[listing.highlighted])

    def _complete(self, completion: Completion) -> None:
        prompt = self.prompt
        row, column = prompt.cursor_location
        takes_argument = completion.value in COMMANDS and completion.value not in (
            "/help",
            "/new",
            "/compact",
            "/copy",
            "/quit",
            "/agents",
        )
        suffix = " " if takes_argument or completion.value not in COMMANDS else ""
        prompt.replace(completion.value + suffix, (row, completion.start), (row, column))
        self._hide_completions()

    # -- keys ---------------------------------------------------------------------------------------

    async def action_stop(self) -> None:
        """Esc: back from a member's session, else stop the running turn."""
        if self.viewing != self.controller.live.session_id:
            await self.show_session(self.controller.live.session_id)
        elif self.controller.stop_turn():
            self.notify("Stopping the turn")

    async def action_interrupt(self) -> None:
        """Ctrl+C: stop the running turn; a second Ctrl+C within three seconds (or when idle) quits."""
        now = time.monotonic()
        if not self.opened.is_set():
            self.exit(0)
            return
        if now - self.armed_quit < QUIT_WINDOW_S:
            await self.action_quit_app()
            return
        self.armed_quit = now
        if self.controller.stop_turn():
            self.notify("Stopping the turn — Ctrl+C again quits")
        elif self.prompt.text:
            self.prompt.clear()
        else:
            self.notify("Press Ctrl+C again to quit")

    async def action_quit_app(self) -> None:
        """Leave: a running turn is stopped and logged as aborted first."""
        await self.controller.shutdown()
        self.exit(0)

    def action_next_mode(self) -> None:
        mode = self.controller.next_mode()
        self.notify(f"Permission mode: {mode}")
        self.refresh_chrome()

    def action_fold_all(self) -> None:
        """Unfold every tool card shown, or fold them all if any is open."""
        cards = [v for v in self.views.values() if isinstance(v, BlockView) and v.block.kind == "tool"]
        expand = not any(v.expanded for v in cards)
        for view in cards:
            view.set_expanded(expand)

    async def action_agents(self) -> None:
        await self.cmd_agents("")

    def action_page_up(self) -> None:
        self.transcript.scroll_page_up()

    def action_page_down(self) -> None:
        self.transcript.scroll_page_down()


def home_relative(path: str) -> str:
    """``path`` with the user's home written ``~`` (as a shell prompt shows it)."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _tokens(count: int) -> str:
    """A token count in k or M."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    if count >= 1000:
        return f"{count / 1000:.1f}k"
    return str(count)
