"""``pydsh headless TASK...``: run one task to idle, trace to stderr, answer to stdout (spec 06 §2.2).

DeepSeek Harness's command line works as it is: the words of the task are joined, ``-`` (or no task
with stdin not a terminal) reads it from stdin, ``--session-id ID`` is ``--resume ID`` and ``--json``
streams the run as NDJSON events (:mod:`pydsh.apps.headless_events`).

Exit codes: 0 when the last turn completed, 1 for any other end (with ``pydsh: <code>: <message>``
for an error turn), 2 for usage errors, 128+n after signal n — SIGINT (130), SIGTERM (143) or
SIGHUP (129): the turn is interrupted, queued input kept, the log flushed, and the session stays
resumable with ``--resume``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid
from typing import Any, TextIO

from pydsh.agent.keys import AGENT_PRESETS, AGENTS
from pydsh.apps.headless_events import EventStream, error_line
from pydsh.apps.usage import UsageError, UsageParser
from pydsh.compaction.engine import CompactionError
from pydsh.compaction.keys import COMPACTION
from pydsh.host import Agent, AgentSpec, Host, HostError, RunResult
from pydsh.host.keys import APP
from pydsh.host.workspace import check_workspace
from pydsh.kernel.context import Context
from pydsh.session.events import Event
from pydsh.session.hooks import SESSION_EVENT
from pydsh.session.ids import session_id_problem
from pydsh.session.keys import SESSIONS
from pydsh.session.log import Session

INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WAIT_CHILDREN_S = 600.0
"""How long a run waits, after the agent's own turn, for the background subagents it started (10 minutes)."""
USAGE = (
    "pydsh headless [--json] [--session-id ID | --resume ID] [--cwd DIR] [--session ID] [--provider P --model M]"
    " [--preset ID] [--wait-children SECONDS] TASK..."
    "\n       pydsh headless --compact ID"
)
TASK_REQUIRED = 'a task is required, for example: pydsh headless "run the tests"'
RESUME_FLAGS = ("--session-id", "--resume")
EXIT_USAGE = 2
USAGE_REFUSALS = frozenset(
    {"not_found", "exists", "bad_workspace", "bad_session_id", "unknown_preset", "member_session"}
)
"""Refusals of the command line's own session options: exit 2 like any usage error."""


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise ValueError(text)
    return value


def parse_args(args: list[str]) -> argparse.Namespace:
    """The headless command line in DeepSeek Harness's forms or pydsh's, checked, with the task read."""
    parser = UsageParser(prog="pydsh headless", usage=USAGE, add_help=True)
    parser.add_argument("task", nargs="*", help='the task; its words are joined, "-" reads it from stdin')
    parser.add_argument("--cwd", help="workspace of a new session (default: the current directory)")
    parser.add_argument("--session", help="id for a new session")
    parser.add_argument("--resume", "--session-id", dest="resume", metavar="ID", help="continue a persisted session")
    parser.add_argument("--json", action="store_true", help="write the run as NDJSON events instead of the answer")
    parser.add_argument("--provider")
    parser.add_argument("--model")
    parser.add_argument("--preset", help="agent preset of a new session (profiles with a preset roster)")
    parser.add_argument(
        "--wait-children",
        type=_seconds,
        default=WAIT_CHILDREN_S,
        metavar="SECONDS",
        help=f"how long to wait for background subagents after the turn (default {WAIT_CHILDREN_S:g})",
    )
    parser.add_argument("--compact", metavar="ID", help="compact the history of a persisted session and exit")
    ns, unknown = parser.parse_known_intermixed_args(args)
    if unknown:
        raise UsageError(f"unknown option '{unknown[0]}'")
    ns.resume_flag = next((a.partition("=")[0] for a in args if a.partition("=")[0] in RESUME_FLAGS), "--resume")
    if ns.compact is not None:
        if ns.task or ns.resume or ns.session or ns.cwd or ns.preset or ns.provider:
            raise UsageError("--compact ID takes no task and no other session option")
        return ns
    check_session_options(ns)
    ns.task = read_task(ns.task)
    return ns


def check_session_options(ns: argparse.Namespace) -> None:
    """The session options agree with each other; ``--cwd`` names a usable workspace."""
    if ns.resume and (ns.session or ns.cwd):
        raise UsageError(f"{ns.resume_flag} cannot be combined with --session or --cwd")
    if ns.resume and ns.preset:
        raise UsageError(f"{ns.resume_flag} keeps the session's preset; --preset is for a new session")
    problem = session_id_problem(ns.session) if ns.session is not None else None
    if problem is not None:
        raise UsageError(f"--session id {problem}")
    if bool(ns.provider) != bool(ns.model):
        raise UsageError("give --provider and --model together")
    if ns.cwd:
        try:
            ns.cwd = check_workspace(ns.cwd)
        except HostError as exc:
            raise UsageError(f"--{exc}") from None


def read_task(words: list[str]) -> str:
    """The task: its words joined by spaces, or stdin for ``-`` or for no words when stdin is not a terminal."""
    if "-" in words and len(words) > 1:
        raise UsageError("`-` must be the only task argument")
    if words == ["-"] or (not words and sys.stdin is not None and not sys.stdin.isatty()):
        task = sys.stdin.buffer.read().decode("utf-8", "replace")
    else:
        task = " ".join(words)
    if not words and not task.strip():
        raise UsageError(TASK_REQUIRED)
    if not task.strip():
        raise UsageError("the task is empty")
    return task


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


class HeadlessApp:
    """The ``app`` service of the headless profile: one task, run to a settled end."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def run(self, host: Host, args: list[str]) -> int:
        stream = wants_json(args)
        try:
            ns = parse_args(args)
        except UsageError as exc:
            return usage_failed(exc.message, stream)
        except SystemExit as exc:
            return int(exc.code or 0)
        if ns.compact is not None:
            return await self._compact(host, ns.compact)
        try:
            agent = await self._open(host, ns)
        except HostError as exc:
            return refused(exc, stream)
        return await self._run(agent, ns)

    async def _open(self, host: Host, ns: argparse.Namespace) -> Agent:
        spec = AgentSpec(cwd=ns.cwd, provider=ns.provider, model=ns.model, preset=ns.preset)
        if ns.resume:
            try:
                return await host.resume(ns.resume, spec)
            except HostError as exc:
                if exc.code == "not_found":
                    raise HostError(f"{exc}; omit {ns.resume_flag} to start a new session", "not_found") from None
                raise
        try:
            return await host.create(spec, ns.session)
        except HostError as exc:
            if exc.code == "exists":
                raise HostError(f"{exc}; continue it with --resume {ns.session}", "exists") from None
            raise

    async def _compact(self, host: Host, session_id: str) -> int:
        """``--compact ID``: resume, compact the whole balanced history from idle, flush, exit."""
        try:
            agent = await host.resume(session_id)
        except HostError as exc:
            return refused(exc, False)
        live = agent.live
        self.ctx.on(SESSION_EVENT, Trace(sys.stderr, agent.session_id).event, global_=False)
        roster = self.ctx.get(AGENT_PRESETS)
        engine = roster.service_for(live, COMPACTION) if roster is not None else None
        engine = engine or self.ctx.get(COMPACTION)
        try:
            if engine is None:
                print(f'pydsh: compact: no compaction engine is mounted for session "{session_id}"', file=sys.stderr)
                return 1
            try:
                result = await engine.compact_now(live, None, str(uuid.uuid4()))
            except CompactionError as exc:
                print(f"pydsh: compact: {exc}", file=sys.stderr)
                return 1
            print(f"compacted {len(result.shadowed_seqs)} history messages of session {session_id} into a checkpoint")
            return 0
        finally:
            await agent.close()

    async def _run(self, agent: Agent, ns: argparse.Namespace) -> int:
        self.ctx.on(SESSION_EVENT, Trace(sys.stderr, agent.session_id).event, global_=False)
        stream = EventStream(sys.stdout, agent.session_id) if ns.json else None
        if stream is not None:
            stream.session(agent.session)
            self.ctx.on(SESSION_EVENT, stream.event, global_=False)
        received: list[signal.Signals] = []
        interrupted = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: signal.Signals) -> None:
            received.append(signum)
            interrupted.set()
            agent.cancel(keep_queue=True)

        for signum in INTERRUPTS:
            loop.add_signal_handler(signum, on_signal, signum)
        failure: HostError | None = None
        try:
            receipt = await agent.submit(ns.task)
            cut_short = await settle_within(agent, ns.wait_children, interrupted)
            result = agent.result(receipt.seq)
        except HostError as exc:
            failure = exc
        finally:
            for signum in INTERRUPTS:
                loop.remove_signal_handler(signum)
            try:
                await agent.close()
            except HostError as exc:
                failure = failure or exc
        if failure is not None:
            return refused(failure, stream is not None)
        if cut_short and not received:
            names = ", ".join(cut_short)
            print(
                f"pydsh: stopped waiting for background subagents after {ns.wait_children:g} s; "
                f"their turns were aborted: {names}",
                file=sys.stderr,
            )
        return report(result, stream, received[0] if received else None, cut_short)


def wants_json(args: list[str]) -> bool:
    """Whether the command line asks for the event stream (read before parsing, so usage errors join it)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def usage_failed(message: str, stream: bool) -> int:
    """A usage error: ``error: <message>`` on stderr (and as an ``error`` event with ``--json``); exit 2."""
    if stream:
        error_line(sys.stdout, "usage", message)
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


async def settle_within(agent: Agent, bound: float, interrupted: asyncio.Event) -> list[str]:
    """Wait for the agent's turn, then up to ``bound`` seconds (or an interrupt) for its background
    subagents, the sessions it woke in this process and the turns their results start; the names of the
    subagents still running when it stopped."""
    await agent.live.when_idle()
    settling = asyncio.ensure_future(agent.settle(also=lambda: others_idle(agent)))
    stopping = asyncio.ensure_future(interrupted.wait())
    try:
        done, _ = await asyncio.wait({settling, stopping}, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
        if settling in done:
            settling.result()
            return []
        return await agent.unsettled()
    finally:
        settling.cancel()
        stopping.cancel()


async def others_idle(agent: Agent) -> None:
    """Every other live session of the process at the end of its turn: a message the task sent to an offline
    session resumed it here, and ending the process would cut that session's turn short."""
    for other in agent.host.ctx.require(AGENTS).all():
        if other is not agent.live and other.status == "running":
            await other.when_idle()


def refused(exc: HostError, stream: bool) -> int:
    """A session the command line asked for was refused: its one line, exit 2 for the user's own options."""
    if exc.code in USAGE_REFUSALS:
        if stream:
            error_line(sys.stdout, exc.code, str(exc))
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if stream:
        error_line(sys.stdout, exc.code, str(exc))
    print(f"pydsh: {exc}", file=sys.stderr)
    return 1


def report(
    result: RunResult, stream: EventStream | None, interrupted: signal.Signals | None, cut_short: list[str]
) -> int:
    """Print the answer (or the ``final`` event) and the closing lines; the exit code."""
    kind = result.finish_reason or "completed"
    if stream is not None:
        stream.final(result, kind)
    elif result.final_response:
        print(result.final_response)
    if kind == "error" and result.error is not None:
        print(f"pydsh: {result.error.get('code')}: {result.error.get('message')}", file=sys.stderr)
    if interrupted is not None:
        if cut_short:
            print(f"pydsh: background subagents stopped by the interrupt: {', '.join(cut_short)}", file=sys.stderr)
        print(
            f"pydsh: interrupted by {interrupted.name}; continue with: "
            f'pydsh headless --resume {result.session_id} "..."',
            file=sys.stderr,
        )
        return 128 + interrupted
    return 0 if kind == "completed" else 1


name = "headless-app"
inject = (AGENTS, SESSIONS)


def apply(ctx: Context, config: None) -> None:
    ctx.provide(APP, HeadlessApp(ctx))
