"""The transcript's widgets and the panels around the prompt: one light widget per block, the prompt with
history and completion, and the approval and question panels answered from the keyboard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from pydsh.apps.tui import cards
from pydsh.apps.tui.feed import Block
from pydsh.apps.tui.markdown import Piece, pieces

if TYPE_CHECKING:
    from pydsh.apps.tui.controller import Ask, Questions
    from pydsh.policy.questions import Answer

FOLDABLE = frozenset({"tool", "reasoning"})


def markdown(text: str) -> RenderableType:
    """``text`` rendered as Markdown; the renderer is imported on first use (it costs a new session's first
    paint 40 ms)."""
    from rich.markdown import Markdown

    return Markdown(text)


class BlockView(Static):
    """One block of the transcript; tool cards and reasoning fold open with Enter, Space or a click."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,space", "fold", "Fold", show=False),
    ]

    def __init__(self, block: Block) -> None:
        super().__init__(classes=f"block block-{block.kind} tone-{block.title or 'none'}")
        self.block = block
        self.expanded = False
        self.shown_version = -1
        self.can_focus = block.kind in FOLDABLE

    def on_mount(self) -> None:
        self.refresh_block()

    def refresh_block(self) -> None:
        """Redraw if the block changed since the last draw; a folded tool card keeps its one line, so its
        redraw lays nothing out again (a layout reflows every card on screen: one per finished tool call
        made typing lag during busy turns)."""
        if self.shown_version != self.block.version:
            first = self.shown_version < 0
            self.shown_version = self.block.version
            self.update(self.renderable_of(), layout=first or not self.one_line)

    @property
    def one_line(self) -> bool:
        """Whether the block is drawn as one line whatever it says (a folded tool card)."""
        return self.block.kind == "tool" and not self.expanded

    def action_fold(self) -> None:
        if self.can_focus:
            self.expanded = not self.expanded
            self.set_class(self.expanded, "expanded")
            self.update(self.renderable_of())

    def on_click(self) -> None:
        self.action_fold()

    def renderable_of(self) -> RenderableType:
        block = self.block
        if block.kind == "user":
            return Text(f"› {block.text}", style="bold")
        if block.kind == "text":
            return markdown(block.text)
        if block.kind == "reasoning":
            head = Text(("▾ " if self.expanded else "▸ ") + f"Thinking ({len(block.text.split())} words)", style="dim")
            return Group(head, Text(block.text, style="dim italic")) if self.expanded else head
        if block.kind == "tool":
            head = cards.headline(block, self.expanded)
            return Group(head, cards.body(block)) if self.expanded else head
        if block.kind == "message":
            return Group(Text(f"✉ From {block.title}", style="bold"), markdown(block.text))
        return Text(block.text, style="bold red" if block.title == "error" else "dim")

    def set_expanded(self, expanded: bool) -> None:
        if self.can_focus and self.expanded != expanded:
            self.action_fold()


class AnswerView(Vertical):
    """An answer: one widget per piece of its Markdown (``pydsh.apps.tui.markdown``), so a tick of a streaming
    answer redraws only the piece that grows. Textual redraws every line of a widget it refreshes, and a 30 KB
    answer in one widget cost 60-100 ms a tick; the pieces that stopped growing are not touched."""

    def __init__(self, block: Block) -> None:
        super().__init__(classes=f"block block-{block.kind} tone-{block.title or 'none'}")
        self.block = block
        self.shown_version = -1
        self.shown: list[tuple[Piece, Static]] = []

    def on_mount(self) -> None:
        self.refresh_block()

    def refresh_block(self) -> None:
        """Redraw the pieces whose text changed (the last one, as an answer streams) and the one that stopped
        being last (a gap now follows it), mount new ones, drop those a shorter text no longer has."""
        if self.shown_version == self.block.version:
            return
        self.shown_version = self.block.version
        texts = pieces(self.block.text)
        for i, text in enumerate(texts):
            last = i == len(texts) - 1
            if i < len(self.shown) and self.shown[i][0].text == text:
                piece, widget = self.shown[i]
                if piece.last != last:
                    piece.last = last
                    widget.update(piece)
                continue
            piece = Piece(text)
            piece.last = last
            if i < len(self.shown):
                widget = self.shown[i][1]
                widget.update(piece)
                self.shown[i] = (piece, widget)
            else:
                widget = Static(piece)
                self.shown.append((piece, widget))
                self.mount(widget)
        if len(self.shown) > len(texts):
            self.remove_children([widget for _, widget in self.shown[len(texts) :]])
            del self.shown[len(texts) :]


View = BlockView | AnswerView


def view_of(block: Block) -> View:
    """The widget that draws ``block``."""
    return AnswerView(block) if block.kind == "text" else BlockView(block)


class Lines(Static):
    """A few unwrapped lines redrawn several times a second (the burst list, member activity): the screen is
    laid out again only when their count changes, since a layout reflows every card mounted."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.count = 0

    def show(self, text: Text) -> None:
        count = text.plain.count("\n") + 1
        self.update(text, layout=count != self.count)
        self.count = count


class PromptArea(TextArea):
    """The prompt: Enter sends, Ctrl+J (or Alt+Enter) starts a new line, Up/Down at the edges walk history."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+j,alt+enter", "newline", "New line", show=False),
    ]

    class Submitted(Message):
        """The user sent the prompt (``steer``: into the running turn)."""

        def __init__(self, text: str, steer: bool) -> None:
            super().__init__()
            self.text = text
            self.steer = steer

    class Navigate(Message):
        """A key the completion list takes while it is open (``up``, ``down``, ``tab``, ``escape``)."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, tab_behavior="focus", **kwargs)
        self.sent: list[str] = []
        self.position = 0
        self.draft = ""
        self.completing = False

    def action_newline(self) -> None:
        self.insert("\n")

    async def _on_key(self, event: events.Key) -> None:
        if self.completing and event.key in ("up", "down", "tab", "escape", "enter"):
            event.stop()
            event.prevent_default()
            self.post_message(self.Navigate(event.key))
            return
        if event.key in ("enter", "ctrl+s"):
            event.stop()
            event.prevent_default()
            self._submit(steer=event.key == "ctrl+s")
            return
        if event.key == "up" and self.cursor_location[0] == 0 and self.sent:
            event.stop()
            event.prevent_default()
            self._walk(-1)
            return
        if (
            event.key == "down"
            and self.cursor_location[0] == self.document.line_count - 1
            and self.position < len(self.sent)
        ):
            event.stop()
            event.prevent_default()
            self._walk(1)
            return
        await super()._on_key(event)

    def _submit(self, steer: bool) -> None:
        text = self.text
        if text.endswith("\\"):
            self.insert("\n")
            return
        if not text.strip():
            return
        if not self.sent or self.sent[-1] != text:
            self.sent.append(text)
        self.position = len(self.sent)
        self.draft = ""
        self.clear()
        self.post_message(self.Submitted(text, steer))

    def _walk(self, step: int) -> None:
        """Show the previous (``-1``) or next (``1``) prompt of the history; past the newest, the draft."""
        if self.position == len(self.sent):
            self.draft = self.text
        self.position = max(0, min(len(self.sent), self.position + step))
        self.text = self.sent[self.position] if self.position < len(self.sent) else self.draft
        self.move_cursor(self.document.end)


class CompletionList(OptionList):
    """``/`` commands or ``@`` paths matching what is typed; Tab or Enter takes the highlighted one."""

    can_focus = False


class AskPanel(Static):
    """A tool approval: Y allows it once, N rejects it, Esc cancels (the turn goes on without it)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer('allowed-once')", "Allow once"),
        Binding("n", "answer('rejected')", "Reject"),
        Binding("escape", "answer('cancelled')", "Cancel"),
    ]
    can_focus = True

    class Answered(Message):
        def __init__(self, outcome: str) -> None:
            super().__init__()
            self.outcome = outcome

    def show(self, ask: Ask) -> None:
        lines = Text()
        lines.append(f"Allow {ask.tool_name}?\n", style="bold")
        args = ask.arguments if isinstance(ask.arguments, dict) else {}
        preview = args.get("command") or args.get("file_path") or args.get("path")
        if preview:
            lines.append(f"  {preview}\n")
        if ask.reason:
            lines.append(f"  {ask.reason}\n", style="italic")
        lines.append("[y] allow once   [n] reject   [esc] cancel", style="dim")
        self.update(lines)

    def action_answer(self, outcome: str) -> None:
        self.post_message(self.Answered(outcome))


class QuestionPanel(Vertical):
    """``ask_user_question``: one question at a time; Enter picks an option (Space marks several when the
    question allows it), the last option types an answer, Esc skips them all."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "skip", "Skip", show=False),
        Binding("space", "mark", "Mark", show=False),
    ]
    OTHER = "Type an answer…"

    class Answered(Message):
        """The answers to every question (``None``: skipped)."""

        def __init__(self, answers: list[Answer] | None) -> None:
            super().__init__()
            self.answers = answers

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.questions: list[dict[str, Any]] = []
        self.answers: list[Answer] = []
        self.marked: set[str] = set()

    def compose(self) -> Any:
        yield Static(id="question-text")
        yield OptionList(id="question-options")
        yield Input(placeholder="Your answer, then Enter", id="question-custom")

    def start(self, pending: Questions) -> None:
        self.questions = list(pending.request.questions)
        self.answers = []
        self._show()

    @property
    def current(self) -> dict[str, Any]:
        return self.questions[len(self.answers)]

    def _show(self) -> None:
        question = self.current
        self.marked = set()
        head = Text()
        if question.get("header"):
            head.append(f"{question['header']}  ", style="bold reverse")
        head.append(str(question.get("question", "")), style="bold")
        if question.get("multiSelect"):
            head.append("   (Space marks, Enter sends)", style="dim")
        self.query_one("#question-text", Static).update(head)
        options = self.query_one("#question-options", OptionList)
        options.clear_options()
        for option in question.get("options") or []:
            label = str(option.get("label", ""))
            description = option.get("description")
            options.add_option(Option(f"{label} — {description}" if description else label, id=label))
        options.add_option(Option(self.OTHER, id=self.OTHER))
        options.highlighted = 0
        custom = self.query_one("#question-custom", Input)
        custom.value = ""
        custom.display = False
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        chosen = event.option.id or ""
        if chosen == self.OTHER:
            custom = self.query_one("#question-custom", Input)
            custom.display = True
            custom.focus()
            return
        selected = tuple(sorted(self.marked | {chosen})) if self.current.get("multiSelect") else (chosen,)
        from pydsh.policy.questions import Answer  # the policy layer loads behind the first frame

        self._answer(Answer(str(self.current["id"]), selected))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value.strip():
            from pydsh.policy.questions import Answer

            self._answer(Answer(str(self.current["id"]), tuple(sorted(self.marked)), event.value))

    def action_mark(self) -> None:
        """Mark or unmark the highlighted option of a multi-select question."""
        options = self.query_one("#question-options", OptionList)
        if not self.current.get("multiSelect") or options.highlighted is None:
            return
        option = options.get_option_at_index(options.highlighted)
        if option.id in (None, self.OTHER):
            return
        self.marked ^= {option.id}
        label = str(option.id)
        found: dict[str, Any] = next((o for o in self.current.get("options") or [] if o.get("label") == label), {})
        mark = "☑ " if option.id in self.marked else ""
        description = found.get("description")
        options.replace_option_prompt_at_index(
            options.highlighted, mark + (f"{label} — {description}" if description else label)
        )

    def _answer(self, answer: Answer) -> None:
        self.answers.append(answer)
        if len(self.answers) < len(self.questions):
            self._show()
        else:
            self.post_message(self.Answered(self.answers))

    def action_skip(self) -> None:
        self.post_message(self.Answered(None))
