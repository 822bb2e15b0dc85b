"""The ``web`` rig: a scripted ``web`` profile host serving the app on a loopback port, and a signed-in client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pydsh.agent.keys import AGENTS
from pydsh.apps.web import RunningServer, bind, start_server
from pydsh.apps.web.options import WebOptions
from pydsh.apps.web.state import Config
from pydsh.testing.hosts import ScriptedHost

JSON = {"Content-Type": "application/json"}
# A bash call asking to leave the sandbox: the model turn behind every approval test.
ESCALATE = {
    "tool_calls": [
        {
            "name": "bash",
            "arguments": {
                "command": "echo escalated",
                "description": "print escalated",
                "sandbox_permissions": "danger-full-access",
                "justification": "demo of the approval card",
            },
        }
    ]
}
INDEX = '<!doctype html><html><head><script type="module" src="/static/v{{version}}/app.js"></script></head></html>\n'


@dataclass
class Web:
    host: ScriptedHost
    server: RunningServer
    client: httpx.AsyncClient
    workspace: Path

    async def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.post(path, content=json.dumps(body), headers={**JSON, **(headers or {})})

    async def delete(self, path: str) -> httpx.Response:
        return await self.client.request("DELETE", path, headers=JSON)

    async def put(self, path: str, body: Any) -> httpx.Response:
        return await self.client.put(path, content=json.dumps(body), headers=JSON)

    async def new_session(self, text: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"cwd": str(self.workspace)}
        if text is not None:
            body["prompt"] = {"text": text}
        response = await self.post("/api/sessions", body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    async def idle(self, session_id: str) -> None:
        agent = self.host.ctx.require(AGENTS).get(session_id)
        await agent.when_idle()


async def open_web(
    script: list[Any],
    home: Path,
    tmp_path: Path,
    config: Config | None = None,
    patches: list[Any] | None = None,
    providers: list[dict[str, Any]] | None = None,
    sign_in: bool = True,
) -> AsyncIterator[Web]:
    """A server and a client; the client spends the single-use token unless ``sign_in`` is false."""
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    (workspace / "hello.txt").write_text("hello world\nsecond line\n")
    static = tmp_path / "static"
    static.mkdir(exist_ok=True)
    (static / "index.html").write_text(INDEX)
    (static / "app.js").write_text("export const ok = 1;\n")
    (static / "style.css").write_text("body { margin: 0; }\n")
    scripted = ScriptedHost(
        script, profile="web", cwd=workspace, dsh_home=home, patches=patches or [], providers=providers
    )
    async with scripted as host:
        options = WebOptions(port=0, open_browser=False, cwd=str(workspace))
        server = await start_server(host, config or Config(), options, bind(options), static_dir=static)
        try:
            async with httpx.AsyncClient(base_url=server.base, timeout=10) as client:
                if sign_in:
                    signed = await client.get(f"/?token={server.token}")
                    assert signed.status_code == 303
                yield Web(host, server, client, workspace)
        finally:
            await server.stop()


@pytest.fixture
def script() -> list[Any]:
    """The model's answers; a test overrides it with ``@pytest.mark.parametrize`` or its own fixture."""
    return [{"text": "Hello from the scripted model."}] * 4


@pytest.fixture
async def web(script: list[Any], isolated_home: Path, tmp_path: Path) -> AsyncIterator[Web]:
    async for rig in open_web(script, isolated_home, tmp_path):
        yield rig


@pytest.fixture
async def unsigned(script: list[Any], isolated_home: Path, tmp_path: Path) -> AsyncIterator[Web]:
    """The rig with its token still unspent (the client holds no cookie)."""
    async for rig in open_web(script, isolated_home, tmp_path, sign_in=False):
        yield rig
