"""``pydsh headless "TASK"``: run one task to idle, trace to stderr, answer to stdout (spec 06 §2.2).

Exit codes: 0 when the last turn completed, 1 for any other end (with ``pydsh: <code>: <message>``
for an error turn), 2 for usage errors, 128+n after signal n — SIGINT (130), SIGTERM (143) or
SIGHUP (129): the turn is interrupted, queued input kept, the log flushed, and the session stays
resumable with ``--resume``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from typing import Any, TextIO

from pydsh.agent.agent import AgentOptions, user_message
from pydsh.agent.presets import RemoteError, header_preset, preset_setup
from pydsh.agent.registry import AgentRegistry, CreateAgentOptions
from pydsh.compaction.engine import CompactionError
from pydsh.kernel.context import Context
from pydsh.session.errors import SessionError, SessionPersistenceNotFoundError
from pydsh.session.events import Event
from pydsh.session.ids import session_id_problem
from pydsh.session.log import Session
from pydsh.session.persistence.base import SessionPersistence

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
USAGE = (
    'pydsh headless "TASK" [--cwd DIR] [--session ID] [--resume ID] [--json] [--provider P --model M] [--preset ID]'
    "\n       pydsh headless --compact ID"
)


class HeadlessUsageError(Exception):
    """A command-line problem: printed as is, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise HeadlessUsageError(f"error: {message}")


def parse_args(args: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="pydsh headless", usage=USAGE, add_help=True)
    parser.add_argument("task", nargs="?", help='the prompt ("-" reads it from stdin)')
    parser.add_argument("--cwd", help="workspace of a new session (default: the current directory)")
    parser.add_argument("--session", help="id for a new session")
    parser.add_argument("--resume", help="continue a persisted session")
    parser.add_argument("--json", action="store_true", help="print a JSON result instead of the answer")
    parser.add_argument("--provider")
    parser.add_argument("--model")
    parser.add_argument("--preset", help="agent preset of a new session (profiles with a preset roster)")
    parser.add_argument("--compact", metavar="ID", help="compact the history of a persisted session and exit")
    ns = parser.parse_args(args)
    if ns.compact is not None:
        if ns.task is not None or ns.resume or ns.session or ns.cwd or ns.preset or ns.provider:
            raise HeadlessUsageError("error: --compact ID takes no task and no other session option")
        return ns
    if ns.task is None:
        raise HeadlessUsageError("error: the following arguments are required: task")
    if ns.resume and (ns.session or ns.cwd):
        raise HeadlessUsageError("error: --resume cannot be combined with --session or --cwd")
    if ns.resume and ns.preset:
        raise HeadlessUsageError("error: --resume keeps the session's preset; --preset is for a new session")
    problem = session_id_problem(ns.session) if ns.session is not None else None
    if problem is not None:
        raise HeadlessUsageError(f"error: --session id {problem}")
    if bool(ns.provider) != bool(ns.model):
        raise HeadlessUsageError("error: give --provider and --model together")
    if ns.cwd and not os.path.isdir(ns.cwd):
        raise HeadlessUsageError(f'error: --cwd "{ns.cwd}" is not an existing directory')
    if ns.task == "-":
        ns.task = sys.stdin.read()
    if not ns.task.strip():
        raise HeadlessUsageError("error: the task is empty")
    return ns


class Trace:
    """A readable account of the run on stderr: assistant text, tool calls and results, retries.

    Lines of other sessions (subagents) carry a ``[<session id prefix>]`` tag.
    """

    def __init__(self, out: TextIO, root_id: str) -> None:
        self.out = out
        self.root_id = root_id
        self._tag = ""

    def event(self, session: Session, event: Event) -> None:
        self._tag = "" if session.id == self.root_id else f"[{session.id[:8]}] "
        etype = event["type"]
        data = event["data"]
        line = None
        if etype.startswith(("compaction/", "command/")):
            line = compaction_line(etype, data)
        elif etype == "assistant/message":
            for block in data["message"]["content"]:
                if block["type"] == "text" and block["text"].strip():
                    self._write(f"assistant: {block['text']}")
        elif etype == "tool/call":
            line = f"→ {data['name']} {_cut(data['arguments'], 200)}"
        elif etype == "tool/result" and event.get("surfaceOp") == "append":
            text = "".join(b.get("text", "") for b in data["message"]["content"])
            mark = "✗" if data["message"].get("isError") else "←"
            line = f"{mark} {_cut(text, 300)}"
        elif etype == "llm/retry":
            failure = data["failure"]
            line = (
                f"retry {data['retry']} in {data['delayMs'] / 1000:.1f}s after {failure['code']}: {failure['message']}"
            )
        elif etype == "turn/end" and data["reason"]["kind"] != "completed":
            line = f"turn ended: {data['reason']['kind']}"
        if line:
            self._write(line)

    def _write(self, text: str) -> None:
        print(self._tag + text, file=self.out, flush=True)


def compaction_line(etype: str, data: Any) -> str | None:
    """The trace line of a compaction, prune or command event (``None``: nothing to say)."""
    if etype == "compaction/summary":
        count = len(data["shadowedSeqs"])
        return f"compacted {count} history messages (~{data['shadowedTokenCount']} tokens) into a checkpoint"
    if etype == "compaction/end" and "error" in data:
        return f"compaction failed, history unchanged: {_cut(data['error'], 300)}"
    if etype == "compaction/prune":
        return f"pruned the middle of a large tool result (~{data['shadowedTokenCount']} tokens before)"
    if etype == "command/done":
        return f"/compact: {data.get('text', data['kind'])}"
    return None


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run_summary(session: Session, since: int) -> dict[str, Any]:
    """Final text, last turn-end reason and summed usage of the events from ``since`` on."""
    final = ""
    reason: dict[str, Any] | None = None
    usage: dict[str, int] = {}
    for event in session.events[since:]:
        if event["type"] == "assistant/message":
            text = "".join(b["text"] for b in event["data"]["message"]["content"] if b["type"] == "text")
            if text:
                final = text
            for key, value in (event["data"].get("usage") or {}).items():
                usage[key] = usage.get(key, 0) + value
        elif event["type"] == "turn/end":
            reason = event["data"]["reason"]
    return {"final_response": final, "reason": reason, "usage": usage}


class HeadlessApp:
    """The ``app`` service of the headless profile."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def run(self, args: list[str]) -> int:
        try:
            ns = parse_args(args)
        except HeadlessUsageError as exc:
            print(exc, file=sys.stderr)
            return 2
        except SystemExit as exc:
            return int(exc.code or 0)
        try:
            return await self._run(ns)
        except SessionError as exc:
            print(f"pydsh: {exc}", file=sys.stderr)
            return 1

    async def _open(self, ns: argparse.Namespace) -> Any:
        agents: AgentRegistry = self.ctx.require("agents")
        options = AgentOptions(provider=ns.provider, model=ns.model)
        if ns.resume:
            try:
                return await agents.resume(ns.resume, agent_options=options, setup=preset_setup(self.ctx))
            except SessionPersistenceNotFoundError:
                raise HeadlessUsageError(f'error: session "{ns.resume}" not found') from None
        if ns.session:
            persistence: SessionPersistence | None = self.ctx.get("session_persistence")
            exists = self.ctx.require("sessions").get(ns.session) is not None or (
                persistence is not None and await persistence.exists(ns.session)
            )
            if exists:
                raise HeadlessUsageError(
                    f'error: session "{ns.session}" already exists; continue it with --resume {ns.session}'
                )
        cwd = os.path.abspath(ns.cwd or os.getcwd())
        return await agents.create(
            CreateAgentOptions(
                session_id=ns.session,
                cwd=cwd,
                agent_options=options,
                agent_preset=header_preset(self.ctx, ns.preset),
                setup=preset_setup(self.ctx),
            )
        )

    async def _compact(self, session_id: str) -> int:
        """``--compact ID``: resume, compact the whole balanced history from idle, flush, exit."""
        agents: AgentRegistry = self.ctx.require("agents")
        try:
            handle = await agents.resume(session_id, setup=preset_setup(self.ctx))
        except SessionPersistenceNotFoundError:
            print(f'error: session "{session_id}" not found', file=sys.stderr)
            return 2
        agent = handle.agent
        trace = Trace(sys.stderr, agent.id)
        self.ctx.on("session/event", trace.event, global_=False)
        roster = self.ctx.get("agent_presets")
        engine = roster.service_for(agent, "compaction") if roster is not None else None
        engine = engine or self.ctx.get("compaction")
        try:
            if engine is None:
                print(f'pydsh: compact: no compaction engine is mounted for session "{session_id}"', file=sys.stderr)
                return 1
            try:
                result = await engine.compact_now(agent, None, str(uuid.uuid4()))
            except CompactionError as exc:
                print(f"pydsh: compact: {exc}", file=sys.stderr)
                return 1
            print(f"compacted {len(result.shadowed_seqs)} history messages of session {session_id} into a checkpoint")
            return 0
        finally:
            await handle.dispose()

    async def _run(self, ns: argparse.Namespace) -> int:
        if ns.compact is not None:
            return await self._compact(ns.compact)
        try:
            handle = await self._open(ns)
        except HeadlessUsageError as exc:
            print(exc, file=sys.stderr)
            return 2
        except RemoteError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        agent = handle.agent
        trace = Trace(sys.stderr, agent.id)
        self.ctx.on("session/event", trace.event, global_=False)
        received: list[signal.Signals] = []
        loop = asyncio.get_running_loop()

        def on_signal(signum: signal.Signals) -> None:
            received.append(signum)
            agent.cancel({"kind": "user"}, keep_inbox=True)

        for signum in INTERRUPTS:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            since = len(agent.session.events)
            agent.followup(user_message(ns.task))
            await agent.when_idle()
            await self.ctx.require("sessions").flush(agent.session)
        finally:
            for signum in INTERRUPTS:
                loop.remove_signal_handler(signum)
            await handle.dispose()
        summary = run_summary(agent.session, since)
        return self._report(ns, agent.id, summary, received[0] if received else None)

    @staticmethod
    def _report(
        ns: argparse.Namespace, session_id: str, summary: dict[str, Any], interrupted: signal.Signals | None
    ) -> int:
        reason = summary["reason"] or {"kind": "completed"}
        kind = reason["kind"]
        if ns.json:
            result = {
                "final_response": summary["final_response"],
                "finish_reason": kind,
                "session_id": session_id,
                "usage": summary["usage"],
            }
            print(json.dumps(result, ensure_ascii=False))
        elif summary["final_response"]:
            print(summary["final_response"])
        if kind == "error":
            error = reason["error"]
            print(f"pydsh: {error.get('code')}: {error.get('message')}", file=sys.stderr)
        if interrupted is not None:
            print(
                f'pydsh: interrupted by {interrupted.name}; continue with: pydsh headless --resume {session_id} "..."',
                file=sys.stderr,
            )
            return 128 + interrupted
        return 0 if kind == "completed" else 1


name = "headless-app"
inject = ("agents", "sessions")


def apply(ctx: Context, config: None) -> None:
    ctx.provide("app", HeadlessApp(ctx))
