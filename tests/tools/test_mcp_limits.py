"""A hostile or broken MCP server meets true error texts and bounded memory (issue 21, items 8 and 9)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pydsh.testing import mcp_server
from tests.tools.harness import Harness, text_of
from tests.tools.test_mcp import http_server, mounted, server_of, stdio

RPC_ERROR = 'Error: mcp-client({}): tool "rpc_error" failed: quota exceeded (try again tomorrow)'


def http(url: str, **overrides: Any) -> dict[str, Any]:
    return {"transport": "streamable-http", "serverName": "web", "url": url, "toolCallTimeoutMs": 5000, **overrides}


async def rpc_errors(h: Harness, server: str) -> None:
    """The server's own -32000 and -32001 errors read as what they say, and the connection stays up."""
    for code in (-32000, -32001):
        failed = await h.call(
            f"mcp__{server}__rpc_error", {"code": code, "message": "quota exceeded (try again tomorrow)"}
        )
        assert text_of(failed) == RPC_ERROR.format(server)
        assert failed.error == {"name": "ToolError", "code": "MCP_ERROR"}
    assert text_of(await h.call(f"mcp__{server}__echo", {"text": "still up"})) == "still up"


# -- 8. true error texts ------------------------------------------------------------------------


async def test_a_servers_own_error_codes_are_not_read_as_disconnect_or_timeout(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio()) as h:
        await rpc_errors(h, "t")
    with http_server("--http") as url:
        async with mounted(tmp_path, http(url)) as h:
            await rpc_errors(h, "web")


async def test_a_response_that_is_not_valid_unicode_answers_its_call_at_once(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio(toolCallTimeoutMs=20000)) as h:
        garbled = await asyncio.wait_for(h.call("mcp__t__garbled", {}), 10)
        assert text_of(garbled) == (
            'Error: Tool "garbled" returned text with a lone UTF-16 surrogate (\\ud800), which is not valid Unicode'
        )
        assert garbled.error == {"name": "ToolError", "code": "MCP_INVALID_RESULT"}
        assert text_of(await h.call("mcp__t__echo", {"text": "still up"})) == "still up"


@pytest.mark.parametrize("size", [5_000_000, 3000], ids=["walked", "parsed"])
async def test_a_result_past_max_result_bytes_is_refused_with_its_size(tmp_path: Path, size: int) -> None:
    limit = {} if size > 1_000_000 else {"maxResultBytes": 1000}
    async with mounted(tmp_path, stdio(**limit)) as h:
        big = await h.call("mcp__t__big", {"bytes": size})
        shown = f"{4 * 1024 * 1024:,}" if size > 1_000_000 else "1,000"
        assert text_of(big) == (
            f'Error: Tool "big" returned {size:,} bytes of content; the limit is {shown} bytes (maxResultBytes)'
        )
        assert big.error == {"name": "ToolError", "code": "MCP_RESULT_TOO_LARGE"}
        assert text_of(await h.call("mcp__t__big", {"bytes": 10})) == "x" * 10


async def test_a_message_past_max_message_bytes_is_never_held(tmp_path: Path) -> None:
    async with mounted(tmp_path, stdio(maxMessageBytes=2_000_000, toolCallTimeoutMs=20000)) as h:
        big = await asyncio.wait_for(h.call("mcp__t__big", {"bytes": 3_000_000}), 10)
        assert re.fullmatch(
            r'Error: Tool "big" returned a message of 3,000,\d{3} bytes; '
            r"the limit of one message is 2,000,000 bytes \(maxMessageBytes\)",
            text_of(big),
        ), text_of(big)
        assert text_of(await h.call("mcp__t__echo", {"text": "still up"})) == "still up"


async def test_http_results_are_bounded_like_stdio_ones(tmp_path: Path) -> None:
    with http_server("--http") as url:
        async with mounted(tmp_path, http(url, maxResultBytes=1_500_000)) as h:
            big = await h.call("mcp__web__big", {"bytes": 2_000_000})
            expected = (
                'Error: Tool "big" returned 2,000,000 bytes of content; the limit is 1,500,000 bytes (maxResultBytes)'
            )
            assert text_of(big) == expected
            many = await h.call("mcp__web__many", {"count": 60_000})
            assert text_of(many) == "\n".join(f"item {i}" for i in range(60_000))


# -- 9. bounded tool lists and results ----------------------------------------------------------


async def test_a_long_tool_list_is_cut_to_the_budget_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
        async with mounted(tmp_path, stdio("--tools", "3000")) as h:
            definitions = [d for d in h.tools.definitions(h.agent) if d.name.startswith("mcp__")]
            assert len(definitions) == 200
            sent = json.dumps([d.schema() for d in definitions], ensure_ascii=False, separators=(",", ":"))
            assert len(sent.encode()) <= 256 * 1024 + len(definitions)
    base = len(mcp_server.BASE_TOOLS)
    dropped = ", ".join(f"generated_{i:05d}" for i in range(200 - base, 210 - base))
    warnings = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert warnings == [
        f"mcp-client(t): kept the first 200 of {3000 + base:,} tools (maxTools 200, maxToolDefinitionBytes 262,144); "
        f"dropped {dropped} and {3000 + base - 210:,} more"
    ]


async def test_the_cut_is_the_same_for_one_large_page_and_many_small_ones(tmp_path: Path) -> None:
    cut = {"maxTools": 1000, "maxToolDefinitionBytes": 100_000}
    whole = stdio("--tools", "1500", name="whole", **cut)
    paged = stdio("--tools", "1500", "--page-size", "40", name="paged", **cut)
    async with mounted(tmp_path, whole, paged) as h:
        kept = [t.raw for t in server_of(h, "whole").tools]
        assert kept == [t.raw for t in server_of(h, "paged").tools]
        assert "generated_00010" in kept and "generated_01499" not in kept


PEAK_PROGRAM = textwrap.dedent(
    """
    import asyncio, json, sys, tempfile
    from pathlib import Path
    from tests.tools.harness import harness, text_of

    def rss(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field)) // 1024

    async def main():
        config = json.loads(sys.argv[1])
        h = await harness(Path(tempfile.mkdtemp()), [("tools", None), ("mcp-client", config)])
        before = rss("VmRSS")
        out = text_of(await h.call("mcp__t__many", {"count": 100000}))
        print(json.dumps({"growth": rss("VmHWM") - before, "lines": len(out.splitlines())}))
        await h.close()

    asyncio.run(main())
    """
)


def test_a_result_of_many_items_is_assembled_in_bounded_memory() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PEAK_PROGRAM, json.dumps(stdio(toolCallTimeoutMs=60000))],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["lines"] == 100_000
    assert measured["growth"] < 80, f"peak grew by {measured['growth']} MB while reading 100,000 items"
