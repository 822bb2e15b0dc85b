"""The five frontends driven the way their users drive them, for the lifecycle contract (``test_contract.py``).

Each driver runs one short scenario against a fresh home and returns what its user would see: the log on
disk at the moment of an acknowledgement, a run's result, a refusal. The model is scripted (compact entries,
one list per session in first-call order), so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp
import yaml

import pydsh
import pydsh.testing
from pydsh.apps.web.options import WebOptions
from pydsh.apps.web.state import Config
from pydsh.testing import ScriptedHost, scripted_patch
from tests.apps.test_acp import Recorder
from tests.apps.web.conftest import INDEX

REPO = Path(__file__).resolve().parents[2]
Scripts = list[list[dict[str, Any]]]


@dataclass
class Outcome:
    """What a frontend showed for one scenario."""

    session_id: str | None = None
    final_response: str | None = None
    finish_reason: str | None = None
    refusal: str | None = None
    """The one-line error (message, or ``status code`` / exit code and text) when the request was refused."""
    on_disk: list[dict[str, Any]] | None = None
    """The session's stored events read right after the frontend acknowledged a prompt."""
    message_id: str | None = None
    """The id the acknowledgement named, where the frontend names one."""


def stored_events(home: Path, session_id: str) -> list[dict[str, Any]]:
    """The events of a session log as they are on disk now, plain or zstd (``[]`` while it has not been written)."""
    found = list((home / "sessions").glob(f"*/{session_id}/session.v4.jsonl*"))
    if not found:
        return []
    data = found[0].read_bytes()
    if found[0].suffix == ".zstd":
        import io

        import zstandard

        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()
    return [json.loads(line) for line in data.decode().splitlines()[1:]]


def receipt_on_disk(events: list[dict[str, Any]], message_id: str) -> bool:
    return any(
        e["type"] == "agent/inbox/spliced" and any(m["id"] == message_id for m in e["data"]["inserted"]) for e in events
    )


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "DSH_HOME": str(home), "PYTHONPATH": str(REPO)}


def patch(tmp_path: Path, scripts: Scripts) -> Path:
    path = tmp_path / "scripted.yml"
    path.write_text(yaml.safe_dump(scripted_patch(scripts)))  # type: ignore[arg-type]
    return path


# -- SDK ---------------------------------------------------------------------------------------------


class SdkPeer:
    """``python -m pydsh.sdk`` with hand-written frames (lone surrogates travel as ``\\udXXX`` escapes)."""

    def __init__(self, tmp_path: Path, home: Path, scripts: Scripts) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydsh.sdk", "--patch", str(patch(tmp_path, scripts))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env(home),
            cwd=tmp_path,
        )
        self.notes: list[dict[str, Any]] = []

    def call(self, rid: str, method: str, params: dict[str, Any] | None = None, raw: str | None = None) -> Any:
        """Send one request (``raw``: its params as JSON text) and read frames until its response."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        text = raw if raw is not None else json.dumps(params or {})
        line = f'{{"jsonrpc":"2.0","id":"{rid}","method":"{method}","params":{text}}}\n'
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()
        while True:
            frame = json.loads(self.proc.stdout.readline())
            if frame.get("id") == rid:
                return frame
            self.notes.append(frame)

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """The events notified for ``session_id`` so far (every frame before the last response was read)."""
        return [
            n["params"]["event"]
            for n in self.notes
            if n.get("method") == "session.event" and n["params"]["sessionId"] == session_id
        ]

    def idle(self, session_id: str) -> None:
        """Read notifications until ``session_id`` went idle (after its last prompt)."""
        assert self.proc.stdout is not None
        while not any(
            n.get("method") == "session.status" and n["params"] == {"sessionId": session_id, "status": "idle"}
            for n in self.notes
        ):
            self.notes.append(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        self.call("bye", "shutdown")
        self.proc.wait(60)


def sdk_session(tmp_path: Path, home: Path, scripts: Scripts, cwd: Path) -> SdkPeer:
    peer = SdkPeer(tmp_path, home, scripts)
    init = peer.call(
        "init", "initialize", {"cwd": str(cwd), "provider": "deepseek-official", "model": "deepseek-v4-flash"}
    )
    assert "result" in init, init
    return peer


def error_text(frame: dict[str, Any]) -> str:
    return str(frame["error"]["message"])


# -- web ---------------------------------------------------------------------------------------------


@dataclass
class WebPage:
    client: Any
    host: ScriptedHost


async def with_web(
    tmp_path: Path, home: Path, scripts: Scripts, cwd: Path, body: Callable[[WebPage], Awaitable[Outcome]]
) -> Outcome:
    """``pydsh web`` on a loopback port over a scripted host, signed in, while ``body`` runs."""
    import httpx

    from pydsh.apps.web import bind, start_server

    static = tmp_path / "static"
    static.mkdir(exist_ok=True)
    (static / "index.html").write_text(INDEX)
    async with ScriptedHost(scripts, profile="web", cwd=cwd, dsh_home=home) as host:
        options = WebOptions(port=0, open_browser=False, cwd=str(cwd))
        server = await start_server(host, Config(), options, bind(options), static_dir=static)
        try:
            async with httpx.AsyncClient(base_url=server.base, timeout=30) as client:
                assert (await client.get(f"/?token={server.token}")).status_code == 303
                client.headers["Origin"] = server.base
                return await body(WebPage(client, host))
        finally:
            await server.stop()


def web_refusal(response: Any) -> str:
    return f"{response.status_code} {response.json()['error']['code']}: {response.json()['error']['message']}"


# -- ACP ---------------------------------------------------------------------------------------------


async def with_acp(
    tmp_path: Path, home: Path, scripts: Scripts, body: Callable[[Any, Recorder], Awaitable[Outcome]]
) -> Outcome:
    """``pydsh acp`` spawned by the ACP library's client, while ``body`` talks to it (and reads what the
    editor was told from the recorder)."""
    stderr = tmp_path / "acp-stderr.txt"
    editor = Recorder()
    with stderr.open("wb") as sink:
        async with acp.spawn_agent_process(
            editor,
            sys.executable,
            "-m",
            "pydsh",
            "acp",
            "--patch",
            str(patch(tmp_path, scripts)),
            env=env(home),
            cwd=tmp_path,
            transport_kwargs={"stderr": sink, "shutdown_timeout": 30.0},
        ) as (conn, _proc):
            await conn.initialize(protocol_version=1)
            return await body(conn, editor)


# -- headless ----------------------------------------------------------------------------------------


def headless(
    tmp_path: Path, home: Path, scripts: Scripts, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pydsh", "headless", "--patch", str(patch(tmp_path, scripts)), *args],
        input=stdin,
        capture_output=True,
        env=env(home),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def headless_final(done: subprocess.CompletedProcess[bytes]) -> dict[str, Any]:
    """The closing ``final`` event of a ``--json`` run (its last stdout line)."""
    final: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    assert final["type"] == "final", final
    return final


def headless_refusal(done: subprocess.CompletedProcess[bytes]) -> str:
    return f"exit {done.returncode}: {done.stderr.decode().strip().splitlines()[-1]}"


# -- embedding ---------------------------------------------------------------------------------------


def embedded(scripts: Scripts, home: Path, cwd: Path) -> pydsh.testing.ScriptedHost:
    return pydsh.testing.scripted_host(scripts, cwd=cwd, dsh_home=home)


async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(function, *args)
