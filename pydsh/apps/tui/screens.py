"""Screens over the session: the resume picker, the agent tree, the model picker and the help."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static, Tree
from textual.widgets.option_list import Option

from pydsh.apps.tui.commands import COMMANDS

if TYPE_CHECKING:
    from pydsh.apps.tui.controller import AgentNode, SessionRow

KEYS = [
    ("Enter", "send (queued while the agent works)"),
    ("Ctrl+S", "steer: send into the running turn"),
    ("Ctrl+J / Alt+Enter", "new line (or end a line with \\)"),
    ("Up / Down", "prompt history"),
    ("Esc", "stop the turn"),
    ("Ctrl+C", "stop the turn; again to quit"),
    ("Shift+Tab", "next permission mode"),
    ("Ctrl+O", "unfold / fold every tool card"),
    ("Ctrl+T", "agent tree"),
    ("Tab", "move between the prompt and the cards"),
    ("@path", "complete a file path"),
]


def ago(ms: int) -> str:
    """How long ago a time in milliseconds was, in one short unit."""
    seconds = max(0, time.time() - ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"


class Picker(ModalScreen[str | None]):
    """A list to choose from with the keyboard; Esc closes it without a choice."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]

    def __init__(self, title: str, options: list[Option]) -> None:
        super().__init__(classes="picker")
        self.title_text = title
        self.options = options

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(Text(self.title_text, style="bold"), classes="dialog-title")
            yield OptionList(*self.options, id="picker-options")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class SessionPicker(Picker):
    """``/resume``: stored sessions, newest first; typing filters them by title."""

    def __init__(self, rows: list[SessionRow]) -> None:
        super().__init__("Resume a session", [])
        self.rows = rows

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(Text(self.title_text, style="bold"), classes="dialog-title")
            yield Input(placeholder="Filter by title", id="picker-filter")
            yield OptionList(*self._options(""), id="picker-options")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def _options(self, query: str) -> list[Option]:
        rows = [r for r in self.rows if query.lower() in r.title.lower()]
        if not rows:
            return [Option("No stored sessions match.", disabled=True)]
        return [Option(self._label(r), id=r.session_id) for r in rows]

    @staticmethod
    def _label(row: SessionRow) -> Text:
        label = Text(row.title, style="bold")
        label.append(f"  {ago(row.updated_at)}  {row.cwd}", style="dim")
        return label

    def on_input_changed(self, event: Input.Changed) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(self._options(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        options.focus()
        if options.option_count and options.highlighted is None:
            options.highlighted = 0

    def on_key(self, event: Any) -> None:
        if event.key == "down" and self.query_one(Input).has_focus:
            self.query_one(OptionList).focus()


class AgentTreeScreen(ModalScreen[str | None]):
    """``/agents``: the open session and every member below it; Enter opens a member's session."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss_none", "Close")]
    MARKS: ClassVar[dict[str, str]] = {"running": "●", "idle": "○", "inactive": "·"}
    WORDS: ClassVar[dict[str, str]] = {"running": "running", "idle": "idle", "inactive": "finished"}
    """A member no longer in memory has finished its work (its log stays readable)."""

    def __init__(self, root: AgentNode) -> None:
        super().__init__(classes="picker")
        self.root = root

    def compose(self) -> Any:
        with Vertical(classes="dialog"):
            yield Static(Text("Agents (Enter opens a session)", style="bold"), classes="dialog-title")
            tree: Tree[str] = Tree(self._label(self.root), data=self.root.session_id, id="agent-tree")
            tree.root.expand()
            self._grow(tree.root, self.root)
            yield tree

    def _label(self, node: AgentNode) -> str:
        return f"{self.MARKS.get(node.status, '·')} {node.name}  ({self.WORDS.get(node.status, node.status)})"

    def _grow(self, parent: Any, node: AgentNode) -> None:
        for child in node.children:
            if not child.children:
                parent.add_leaf(self._label(child), data=child.session_id)
                continue
            branch = parent.add(self._label(child), data=child.session_id, expand=True)
            self._grow(branch, child)

    def on_mount(self) -> None:
        self.query_one(Tree).focus()

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        self.dismiss(event.node.data)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """``/help``: the keys and the commands."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "close", "Close")]

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        """``extra``: more commands to list (the composition's MCP prompts)."""
        super().__init__()
        self.extra = extra or {}

    def compose(self) -> Any:
        text = Text()
        text.append("Keys\n", style="bold")
        for key, what in KEYS:
            text.append(f"  {key:<20}", style="bold")
            text.append(f"{what}\n")
        text.append("\nCommands\n", style="bold")
        for name, what in {**COMMANDS, **self.extra}.items():
            text.append(f"  {name:<20}", style="bold")
            text.append(f"{what}\n")
        text.append("\nEsc closes this help.", style="dim")
        with Vertical(classes="dialog"):
            yield Static(text, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
