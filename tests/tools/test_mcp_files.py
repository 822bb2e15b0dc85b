"""Servers files where each entry stands alone, the legacy SSE transport, and HTTP sessions ended on exit
(issue 21, item 12)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from tests.tools.harness import text_of
from tests.tools.test_mcp import SERVER, http_server, mounted, mounted_rows, names, until, write_servers


async def test_each_entry_of_a_servers_file_stands_alone(
    tmp_path: Path, isolated_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = isolated_home / "mcp.json"
    with http_server("--sse", path="/sse") as sse_url:
        write_servers(
            path,
            {
                "docs": {"command": sys.executable, "args": [SERVER]},
                "legacy": {"type": "sse", "url": sse_url},
                "socket": {"type": "websocket", "url": "ws://127.0.0.1:1/"},
                "listed": ["not", "an", "object"],
                "gone": {"command": str(tmp_path / "no-such-server"), "failOnStartupError": True},
            },
        )
        with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
            async with mounted_rows(tmp_path, ("mcp-servers", None)) as h:
                assert h.kernel.loader.failures == []
                assert "mcp__docs__echo" in names(h) and "mcp__legacy__echo" in names(h)
                assert text_of(await h.call("mcp__legacy__echo", {"text": "over sse"})) == "over sse"
                assert not any(n.startswith(("mcp__socket__", "mcp__listed__", "mcp__gone__")) for n in names(h))
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mcp-servers:")]
    assert skipped == [
        f'mcp-servers: {path}: server "socket" skipped: transport websocket is not supported (use stdio, http or sse)',
        f'mcp-servers: {path}: server "listed" skipped: expected an object',
        'mcp-servers: server "gone" not mounted: mcp-client(gone): initial connection or tool synchronization '
        f"failed: [Errno 2] No such file or directory: '{tmp_path / 'no-such-server'}'",
    ]


async def test_a_malformed_servers_file_loses_only_itself(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    (isolated_home / "mcp.json").write_text('{"mcpServers": {"docs": ')
    monkeypatch.chdir(tmp_path)
    write_servers(tmp_path / ".mcp.json", {"project": {"command": sys.executable, "args": [SERVER]}})
    with caplog.at_level(logging.WARNING, "pydsh.tools.mcp"):
        async with mounted_rows(tmp_path, ("mcp-servers", {"includeProject": True})) as h:
            assert h.kernel.loader.failures == []
            assert "mcp__project__echo" in names(h)
    assert f"mcp-servers: {isolated_home / 'mcp.json'} skipped: Expecting value: line 1 column 25 (char 24)" in (
        caplog.text
    )


async def test_a_streamable_http_session_is_ended_on_close(tmp_path: Path) -> None:
    requests = tmp_path / "requests.log"
    with http_server("--http", "--request-log", str(requests)) as url:
        config = {"transport": "streamable-http", "serverName": "web", "url": url}
        async with mounted(tmp_path, config) as h:
            assert text_of(await h.call("mcp__web__echo", {"text": "hi"})) == "hi"
            assert "DELETE /mcp" not in requests.read_text()
        await until(lambda: "DELETE /mcp" in requests.read_text().splitlines(), "the session's DELETE")


async def test_the_legacy_sse_transport_as_a_row(tmp_path: Path) -> None:
    with http_server("--sse", path="/sse") as url:
        config = {"transport": "sse", "serverName": "old", "url": url, "maxResultBytes": 1_500_000}
        async with mounted(tmp_path, config) as h:
            assert text_of(await h.call("mcp__old__echo", {"text": "legacy"})) == "legacy"
            big = await h.call("mcp__old__big", {"bytes": 2_000_000})
            assert text_of(big) == (
                'Error: Tool "big" returned 2,000,000 bytes of content; the limit is 1,500,000 bytes (maxResultBytes)'
            )
