"""Model text, tool output and file names as the page shows them (issue 24 item 7): CommonMark/GFM Markdown
behind the sanitiser, terminal colours, and bidi controls made visible."""

from __future__ import annotations

from typing import Any

from tests.apps.web.browser.harness import screenshot, unfold, wait_for
from tests.apps.web.browser.test_a11y import serious
from tests.apps.web.browser.test_chat import send
from tests.apps.web.browser.test_tools import card, expand

PYTHON = "https://en.wikipedia.org/wiki/Python_(programming_language)"
LISP = "https://en.wikipedia.org/wiki/Lisp_(programming_language)"
MARKDOWN = f"""| Tool | Calls |
|:-----|------:|
| read | 3 |
| bash | 12 |

- outer
  - inner one
  - inner two
- second

See [Python]({PYTHON}) and {LISP}.

Read [the docs](https://example.org/docs "The docs") then [click me](javascript:alert(1)) or [this](data:text/html,x).

<b>bold?</b> <script>alert(1)</script>

- [x] done
- [ ] to do
"""
RLO = "\u202e"
ANSI_COMMAND = r"printf '\033[31mred\033[0m plain \033[1;38;5;34mgreen\033[0m\n'"


def answer_of(page: Any) -> Any:
    page.locator(".turn-end").wait_for()
    return page.locator(".answer").last


def test_tables_nested_lists_and_links_render_as_markdown(web, browse):
    server = web([{"text": MARKDOWN}])
    page = browse(server).page
    send(page, "Show me some Markdown")
    answer = answer_of(page)
    table = answer.locator("table")
    assert table.locator("th").all_inner_texts() == ["Tool", "Calls"]
    assert [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()] == [
        ["read", "3"],
        ["bash", "12"],
    ]
    assert "|" not in answer.inner_text()
    nested = answer.locator("ul > li > ul > li")
    assert nested.all_inner_texts() == ["inner one", "inner two"]
    assert answer.locator("ul > li > ul").evaluate("ul => ul.parentElement.firstChild.textContent.trim()") == "outer"
    assert answer.locator(f'a[href="{PYTHON}"]').inner_text() == "Python"
    assert answer.locator(f'a[href="{LISP}"]').inner_text() == LISP
    titled = answer.locator('a[href="https://example.org/docs"]')
    assert titled.inner_text() == "the docs"
    assert titled.get_attribute("title") == "The docs"
    assert answer.locator("a").count() == 3
    assert all(a.get_attribute("rel") == "noopener noreferrer" for a in answer.locator("a").all())
    text = answer.inner_text()
    assert "then click me or this." in text
    assert "javascript" not in text and "data:" not in text
    assert "<b>bold?</b> <script>alert(1)</script>" in text
    assert answer.locator("b, script").count() == 0
    assert answer.locator(".md-check").all_inner_texts() == ["☑", "☐"]
    assert not serious(page, "markdown answer")
    screenshot(page, "markdown")


def test_terminal_colours_render_and_escapes_never_show(web, browse):
    server = web(
        [
            {"tool_calls": [{"name": "bash", "arguments": {"description": "colours", "command": ANSI_COMMAND}}]},
            {"text": "Found \x1b[32mgreen\x1b[0m text."},
        ]
    )
    page = browse(server).page
    send(page, "Print colours")
    answer = answer_of(page)
    assert answer.inner_text() == "Found green text."
    unfold(page)
    out = expand(page, "bash").locator(".tool-output")
    assert out.inner_text().strip() == "red plain green"
    assert out.locator(".ansi-red").inner_text() == "red"
    assert out.locator(".ansi-green.ansi-bold").inner_text() == "green"


def test_bidi_controls_show_as_markers_in_chat_tool_output_and_file_names(web, browse):
    name = f"photo{RLO}gnp.exe"
    server = web(
        [
            {"tool_calls": [{"name": "write", "arguments": {"file_path": name, "content": "x\n"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"description": "list", "command": "ls photo*"}}]},
            {"text": f"Wrote **{name}**."},
        ]
    )
    page = browse(server).page
    send(page, f"Save {name}")
    shown = "photo⟨U+202E⟩gnp.exe"
    answer = answer_of(page)
    assert answer.inner_text() == f"Wrote {shown}."
    assert page.locator(".bubble").inner_text() == f"Save {shown}"
    unfold(page)
    summary = card(page, "write").locator(".tool-summary")
    wait_for(lambda: shown in summary.inner_text(), message="the write card's file name")
    assert expand(page, "bash").locator(".tool-output").inner_text().strip() == shown
    assert RLO not in page.locator("#conversation").inner_text()
