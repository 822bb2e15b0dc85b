"""Our Python client of the SDK wire (spec 06 §14): async-first, with a blocking facade.

It spawns ``pydsh --profile sdk`` (or the reference ``dsh``), speaks newline-delimited JSON-RPC
over the child's stdio and collects runs the way the published ``deepseek-harness-sdk`` does.
The wire is its only contract: it imports no pydsh runtime module, only the wire models.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
import threading
import uuid
import weakref
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from pydsh.kernel.errors import PydshError
from pydsh.session import outcome
from pydsh.wire.framing import LineSplitter, decode_line, encode_frame
from pydsh.wire.protocol import DELTA_NOTIFICATION
from pydsh.wire.results import InitializeResult, PromptResult, WorkingDirectoryResult

__all__ = [
    "AsyncHarness",
    "AsyncJsonRpcClient",
    "AsyncSession",
    "Harness",
    "HarnessConfig",
    "HarnessError",
    "JsonRpcError",
    "Notification",
    "RunResult",
    "RunStream",
    "SdkProtocolError",
    "Session",
    "Subscription",
    "SyncRunStream",
    "TransportClosedError",
]

T = TypeVar("T")
ModelT = TypeVar("ModelT", bound=BaseModel)
Callback = Callable[[Any], Any]
PathLike = str | os.PathLike[str]
Input = str | list[dict[str, Any]]

READ_CHUNK = 1 << 16
STDERR_LINE_BYTES = 1 << 16


# -- errors ------------------------------------------------------------------------------------


class HarnessError(PydshError):
    """Base class of the client's errors."""


class JsonRpcError(HarnessError):
    """An error response: ``code``, ``message`` and optional ``data`` as sent."""

    def __init__(self, code: int | None, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class TransportClosedError(HarnessError):
    """The runtime's stdout ended or the process exited while something waited on it."""


class SdkProtocolError(HarnessError):
    """The runtime sent something outside the protocol (a non-object result, a bad ``turn/end``…)."""


# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HarnessConfig:
    """How to launch and initialise one runtime (spec 06 §14.1)."""

    provider: str = "deepseek-official"
    model: str = "deepseek-v4-flash"
    reasoning_effort: str | None = None
    max_tokens: int | None = None
    cwd: PathLike | None = None
    runtime_cwd: PathLike | None = None
    dsh_bin: PathLike | None = None
    profile: str = "sdk"
    patches: tuple[PathLike, ...] = ()
    dsh_home: PathLike | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    base_url: str | None = None
    api_key: str | None = None
    launch_args: tuple[str, ...] | None = None
    initialize_timeout: float = 30.0
    request_timeout: float | None = None
    shutdown_timeout: float = 1.0
    stderr_tail_lines: int = 400
    stream_deltas: bool = False


@dataclass(frozen=True)
class Notification:
    """One server notification; non-object ``params`` read as ``{}``."""

    method: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class RunResult:
    """What one ``run`` collected (spec 06 §9, §14.3)."""

    session_id: str
    message_id: str
    final_response: str
    finish_reason: str | None
    events: list[dict[str, Any]]
    notifications: list[Notification]
    child_session_ids: tuple[str, ...]


def finish_reason(events: list[dict[str, Any]]) -> str | None:
    """``data.reason.kind`` of the last ``turn/end`` (``pydsh.session.outcome``); a non-string kind is a
    protocol error."""
    try:
        return outcome.finish_reason(events)
    except ValueError as exc:
        raise SdkProtocolError(str(exc)) from None


def is_receipt(note: Notification, session_id: str, message_id: str) -> bool:
    """The splice that queued ``message_id`` on ``session_id`` (where a run starts collecting)."""
    if note.method != "session.event" or note.payload.get("sessionId") != session_id:
        return False
    event = note.payload.get("event")
    if not isinstance(event, dict) or event.get("type") != "agent/inbox/spliced":
        return False
    data = event.get("data")
    inserted = data.get("inserted") if isinstance(data, dict) else None
    return isinstance(inserted, list) and any(isinstance(m, dict) and m.get("id") == message_id for m in inserted)


def content_blocks(value: Input) -> list[dict[str, Any]]:
    """A run input as content blocks: a string is one text block, a list is sent verbatim."""
    return [{"type": "text", "text": value}] if isinstance(value, str) else value


async def _call(callback: Callback | None, value: Any) -> None:
    if callback is not None:
        result = callback(value)
        if inspect.isawaitable(result):
            await result


async def _within(deadline: float | None, awaitable: Awaitable[T], what: str) -> T:
    """``awaitable`` bounded by an absolute loop-time ``deadline`` (``None``: unbounded)."""
    if deadline is None:
        return await awaitable
    remaining = deadline - asyncio.get_running_loop().time()
    try:
        return await asyncio.wait_for(awaitable, max(remaining, 0))
    except TimeoutError:
        raise TimeoutError(f"{what} timed out") from None


# -- JSON-RPC over a child's stdio -------------------------------------------------------------


class Subscription:
    """Notifications matching a predicate, in arrival order; an async iterator and a context manager."""

    def __init__(
        self, client: AsyncJsonRpcClient, predicate: Callable[[Notification], bool] | None, root: str | None = None
    ) -> None:
        self._client = client
        self.predicate = predicate
        self.root = root
        """The session whose tree this follows (routed by session id, see :meth:`AsyncJsonRpcClient.subscribe_tree`)."""
        self.queue: asyncio.Queue[Notification | BaseException] = asyncio.Queue()

    def offer(self, note: Notification) -> bool:
        try:
            matches = self.predicate is None or self.predicate(note)
        except Exception as exc:
            self.close()
            self.queue.put_nowait(exc)
            return False
        if matches:
            self.queue.put_nowait(note)
        return matches

    async def next(self) -> Notification:
        item = await self.queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def next_nowait(self) -> Notification | None:
        """The next queued notification, or ``None`` when none is queued."""
        try:
            item = self.queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._client.unsubscribe(self)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Notification:
        return await self.next()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncJsonRpcClient:
    """One child process spoken to over newline-delimited JSON-RPC."""

    def __init__(self, stderr_tail_lines: int = 400) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr_tail: deque[str] = deque(maxlen=stderr_tail_lines)
        self._pending: dict[str, asyncio.Future[Any]] = {}
        self._subscriptions: dict[str | None, list[Subscription]] = {}
        """Subscriptions by the root of the session tree they follow (``None``: those with a predicate)."""
        self._parents: dict[str, str] = {}
        self.unclaimed: asyncio.Queue[Notification | BaseException] = asyncio.Queue()
        self._readers: list[asyncio.Task[None]] = []
        self._closed: TransportClosedError | None = None

    async def spawn(self, argv: list[str], *, env: dict[str, str], cwd: str) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        weakref.finalize(self, _kill_if_running, self.proc.pid, self.proc)
        self._readers = [
            asyncio.ensure_future(self._read_stdout()),
            asyncio.ensure_future(self._read_stderr()),
        ]

    # -- requests ---------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Send one request and wait for its answer (``JsonRpcError`` for an error response)."""
        request_id = str(uuid.uuid4())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        try:
            await self._write(frame)
            if timeout is None:
                return await future
            try:
                return await asyncio.wait_for(future, timeout)
            except TimeoutError:
                suffix = self.diagnostics()
                message = f"{method} timed out after {timeout:g} s waiting for the SDK runtime"
                raise TimeoutError(f"{message}\n{suffix}" if suffix else message) from None
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a client notification (the server drops them; useful for probing)."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        await self._write(frame)

    async def write_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests of the server's framing)."""
        stdin = self._stdin()
        stdin.write(data)
        await self._drain(stdin)

    async def _write(self, frame: dict[str, Any]) -> None:
        await self.write_raw(encode_frame(frame))

    def _stdin(self) -> asyncio.StreamWriter:
        if self._closed is not None:
            raise self._closed
        if self.proc is None or self.proc.stdin is None or self.proc.stdin.is_closing():
            raise TransportClosedError("the SDK runtime is not running")
        return self.proc.stdin

    async def _drain(self, stdin: asyncio.StreamWriter) -> None:
        try:
            await stdin.drain()
        except (ConnectionError, OSError) as exc:
            raise self._closed_error("writing to the SDK runtime failed") from exc

    # -- notifications ----------------------------------------------------------------------

    def subscribe(self, predicate: Callable[[Notification], bool] | None = None) -> Subscription:
        """Every notification ``predicate`` accepts (all of them without one)."""
        return self._add(Subscription(self, predicate))

    def subscribe_tree(self, root: str) -> Subscription:
        """The notifications of ``root``'s session tree (:meth:`tree_filter`), routed by session id: with many
        sessions in flight each notification reaches its subscriptions without asking every other one."""
        return self._add(Subscription(self, self.tree_filter(root), root))

    def _add(self, subscription: Subscription) -> Subscription:
        if self._closed is not None:
            subscription.queue.put_nowait(self._closed)
        else:
            self._subscriptions.setdefault(subscription.root, []).append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        held = self._subscriptions.get(subscription.root, [])
        if subscription in held:
            held.remove(subscription)
            if not held:
                del self._subscriptions[subscription.root]

    def _lineage(self, session_id: object) -> list[str]:
        """``session_id`` and its ancestors learned from ``subagent.started`` (none for a non-string)."""
        lineage: list[str] = []
        current = session_id if isinstance(session_id, str) else None
        while current is not None and current not in lineage:
            lineage.append(current)
            current = self._parents.get(current)
        return lineage

    def _roots(self, note: Notification) -> list[str]:
        """The roots whose session trees ``note`` belongs to: those of its session, or for ``subagent.*`` those of
        the parent and the child itself."""
        payload = note.payload
        if note.method in ("subagent.started", "subagent.finished"):
            child = payload.get("childSessionId")
            return self._lineage(payload.get("parentSessionId")) + ([child] if isinstance(child, str) else [])
        return self._lineage(payload.get("sessionId"))

    def tree_filter(self, root: str) -> Callable[[Notification], bool]:
        """The published client's session-tree rule (spec 06 §9 rule 3)."""

        def belongs(note: Notification) -> bool:
            return root in self._roots(note)

        return belongs

    # -- reading ----------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        splitter = LineSplitter(self._overflow)
        try:
            while chunk := await self.proc.stdout.read(READ_CHUNK):
                for line in splitter.feed(chunk):
                    self._dispatch(decode_line(line))
            for line in splitter.finish():
                self._dispatch(decode_line(line))
        finally:
            await self._stdout_closed()

    def _overflow(self, limit: int) -> None:
        self.stderr_tail.append(f"(client) dropped a line longer than {limit} bytes")

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        splitter = LineSplitter(self._overflow, STDERR_LINE_BYTES)
        while chunk := await self.proc.stderr.read(READ_CHUNK):
            self.stderr_tail.extend(line.decode("utf-8", "replace") for line in splitter.feed(chunk))
        self.stderr_tail.extend(line.decode("utf-8", "replace") for line in splitter.finish())

    def _dispatch(self, message: object) -> None:
        if not isinstance(message, dict):
            return
        rid, method = message.get("id"), message.get("method")
        if isinstance(method, str):
            if rid is None:
                params = message.get("params")
                self._deliver(Notification(method, params if isinstance(params, dict) else {}))
            return
        future = self._pending.get(str(rid)) if rid is not None else None
        if future is None or future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            future.set_exception(JsonRpcError(code, str(error.get("message", "JSON-RPC error")), error.get("data")))
        else:
            future.set_result(message.get("result"))

    def _deliver(self, note: Notification) -> None:
        if note.method == "subagent.started":
            parent, child = note.payload.get("parentSessionId"), note.payload.get("childSessionId")
            if isinstance(parent, str) and isinstance(child, str) and parent and child and parent != child:
                self._parents[child] = parent
        claimed = False
        for subscription in list(self._subscriptions.get(None, ())):
            claimed = subscription.offer(note) or claimed
        for root in dict.fromkeys(self._roots(note)):
            for subscription in self._subscriptions.get(root, ()):
                subscription.queue.put_nowait(note)
                claimed = True
        if not claimed:
            self.unclaimed.put_nowait(note)

    async def _stdout_closed(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 0.5)
        if len(self._readers) > 1:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._readers[1]), 0.5)
        self._closed = self._closed_error("the SDK runtime closed its stdout")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._closed)
        for held in self._subscriptions.values():
            for subscription in held:
                subscription.queue.put_nowait(self._closed)
        self._subscriptions.clear()
        self.unclaimed.put_nowait(self._closed)

    def _closed_error(self, reason: str) -> TransportClosedError:
        diagnostics = self.diagnostics()
        return TransportClosedError(f"{reason}\n{diagnostics}" if diagnostics else reason)

    def diagnostics(self) -> str:
        """``exit code: N`` (once exited) and the stderr tail."""
        parts = []
        if self.proc is not None and self.proc.returncode is not None:
            parts.append(f"exit code: {self.proc.returncode}")
        if self.stderr_tail:
            parts.append("stderr tail:\n" + "\n".join(self.stderr_tail))
        return "\n".join(parts)

    # -- closing ----------------------------------------------------------------------------

    async def close(self, grace: float) -> None:
        """Close stdin, wait ``grace`` s, terminate, wait again, kill (the published order, after ``shutdown``)."""
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        for stop in (None, proc.terminate, proc.kill):
            if proc.returncode is not None:
                break
            if stop is not None:
                with contextlib.suppress(ProcessLookupError):
                    stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace if stop is not proc.kill else None)
        await asyncio.gather(*self._readers, return_exceptions=True)


def _kill_if_running(pid: int, proc: asyncio.subprocess.Process) -> None:
    """Last resort at collection or interpreter exit: never leave the runtime orphaned."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, 9)


# -- the async harness -------------------------------------------------------------------------


def _launch(config: HarnessConfig) -> tuple[list[str], dict[str, str], str, str]:
    """argv, env, child cwd and workspace of a config; ``ValueError`` for a bad one, before spawning."""
    cwd = str(Path(config.cwd or os.getcwd()).expanduser().resolve())
    runtime_cwd = str(Path(config.runtime_cwd).expanduser().resolve()) if config.runtime_cwd is not None else cwd
    env = {**os.environ, **dict(config.env)}
    if config.base_url is not None:
        env["DEEPSEEK_BASE_URL"] = config.base_url
    if config.api_key is not None:
        env["DEEPSEEK_API_KEY"] = config.api_key
    home = config.dsh_home if config.dsh_home is not None else env.get("DSH_HOME") or "~/.pydsh"
    if not str(home).strip():
        raise ValueError("HarnessConfig requires a non-empty dsh_home")
    env["DSH_HOME"] = str(Path(home).expanduser().resolve())
    if config.launch_args is not None:
        return list(config.launch_args), env, runtime_cwd, cwd
    if not config.profile:
        raise ValueError("HarnessConfig requires a profile name")
    base = [str(Path(config.dsh_bin).expanduser().resolve())] if config.dsh_bin else [sys.executable, "-m", "pydsh"]
    patches = [arg for p in config.patches for arg in ("--patch", str(Path(p).expanduser().resolve()))]
    return [*base, "--profile", config.profile, *patches], env, runtime_cwd, cwd


def _validated(model: type[ModelT], method: str, result: Any) -> ModelT:
    if not isinstance(result, dict):
        raise SdkProtocolError(f"{method} response must be a JSON object")
    try:
        return model.model_validate(result)
    except ValidationError as exc:
        raise SdkProtocolError(f"{method} response is invalid: {exc.errors()[0]['msg']}") from None


class AsyncHarness:
    """Owns one runtime process: ``async with AsyncHarness(cwd=…, dsh_home=…) as h: await h.run("…")``."""

    def __init__(self, config: HarnessConfig | None = None, **kwargs: Any) -> None:
        if config is not None and kwargs:
            raise TypeError("pass either HarnessConfig or keyword options, not both")
        self.config = config or HarnessConfig(**kwargs)
        self.client = AsyncJsonRpcClient(self.config.stderr_tail_lines)
        self.server_info: dict[str, Any] | None = None
        self.extensions: tuple[str, ...] = ()
        self._starting: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHarness:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Spawn and ``initialize`` once; on failure close and re-raise with the stderr tail."""
        if self._closing is not None:
            raise TransportClosedError("this harness was closed")
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        argv, env, runtime_cwd, cwd = _launch(self.config)
        await self.client.spawn(argv, env=env, cwd=runtime_cwd)
        params: dict[str, Any] = {"cwd": cwd, "provider": self.config.provider, "model": self.config.model}
        if self.config.reasoning_effort is not None:
            params["reasoningEffort"] = self.config.reasoning_effort
        if self.config.max_tokens is not None:
            params["maxTokens"] = self.config.max_tokens
        if self.config.stream_deltas:
            params["pydshExtensions"] = {"deltas": True}
        try:
            raw = await self.client.request("initialize", params, timeout=self.config.initialize_timeout)
            result = _validated(InitializeResult, "initialize", raw)
        except TimeoutError as exc:
            await self.close()
            raise TimeoutError(f"{exc}\nselected dsh profile {self.config.profile!r}") from exc
        except JsonRpcError as exc:
            await self.close()
            tail = self.client.diagnostics()
            raise JsonRpcError(exc.code, f"{exc.message}\n{tail}" if tail else exc.message, exc.data) from exc
        except BaseException:
            await self.close()
            raise
        self.server_info = result.serverInfo.model_dump() if result.serverInfo is not None else None
        self.extensions = tuple(result.pydsh.extensions) if result.pydsh is not None else ()

    async def close(self) -> None:
        """``shutdown`` (bounded), then close stdin, wait, terminate, kill. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())
        await asyncio.shield(self._closing)

    async def _close(self) -> None:
        if self.client.proc is None:
            return
        grace = self.config.shutdown_timeout
        try:
            await self.client.request("shutdown", timeout=grace)
        except Exception as exc:
            self.client.stderr_tail.append(f"(client) shutdown request failed: {exc}")
        await self.client.close(grace)

    def session(self, session_id: str | None = None) -> AsyncSession:
        """A handle on a session (no wire traffic); the default id is ``session-<uuid4 hex>``."""
        return AsyncSession(self, session_id or f"session-{uuid.uuid4().hex}")

    async def resume_session(self, session_id: str) -> AsyncSession:
        """``session/resume`` a persisted session of this harness home."""
        await self.request("session/resume", {"sessionId": session_id})
        return AsyncSession(self, session_id)

    async def run(self, input: Input, *, session_id: str | None = None, **kwargs: Any) -> RunResult:
        """``session(session_id).run(input, …)``."""
        return await self.session(session_id).run(input, **kwargs)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Start if needed, then one request with the configured timeout; the result must be an object."""
        await self.start()
        result = await self.client.request(method, params, timeout=self.config.request_timeout)
        if not isinstance(result, dict):
            raise SdkProtocolError(f"{method} response must be a JSON object")
        return result

    async def unclaimed(self) -> AsyncIterator[Notification]:
        """Notifications no run claimed (late child frames, other sessions), as they arrive."""
        while True:
            item = await self.client.unclaimed.get()
            if isinstance(item, BaseException):
                return
            yield item


class AsyncSession:
    """One session of an :class:`AsyncHarness`."""

    def __init__(self, harness: AsyncHarness, session_id: str) -> None:
        self.harness = harness
        self.id = session_id

    def stream(
        self,
        input: Input,
        *,
        on_event: Callback | None = None,
        on_status: Callback | None = None,
        on_notification: Callback | None = None,
        on_text: Callback | None = None,
        wait_children: bool = False,
        timeout: float | None = None,
    ) -> RunStream:
        """The run's notifications as an async iterator; ``stream.result`` once exhausted."""
        callbacks = _Callbacks(on_event, on_status, on_notification, on_text)
        return RunStream(self, content_blocks(input), callbacks, wait_children, timeout)

    async def run(self, input: Input, **kwargs: Any) -> RunResult:
        """Prompt and collect until the session is idle again (spec 06 §14.3)."""
        stream = self.stream(input, **kwargs)
        async with stream:
            async for _note in stream:
                pass
        assert stream.result is not None
        return stream.result

    async def prompt(self, input: Input) -> str:
        """``session/prompt`` alone; returns the ``messageId``."""
        raw = await self.harness.request(
            "session/prompt", {"sessionId": self.id, "contentBlocks": content_blocks(input)}
        )
        return _validated(PromptResult, "session/prompt", raw).messageId

    async def wait(self, timeout: float | None = None) -> None:
        """``session/wait``: the session and its managed descendants have settled."""
        await self.harness.start()
        await self.harness.client.request("session/wait", {"sessionId": self.id}, timeout=timeout)

    async def get_working_directory(self) -> str:
        raw = await self.harness.request("session/working-directory/get", {"sessionId": self.id})
        return _validated(WorkingDirectoryResult, "session/working-directory/get", raw).cwd

    async def set_working_directory(self, path: PathLike) -> str:
        params = {"sessionId": self.id, "path": os.fspath(path)}
        raw = await self.harness.request("session/working-directory/set", params)
        return _validated(WorkingDirectoryResult, "session/working-directory/set", raw).cwd


@dataclass(frozen=True)
class _Callbacks:
    on_event: Callback | None
    on_status: Callback | None
    on_notification: Callback | None
    on_text: Callback | None


class RunStream:
    """One run as an async iterator of its notifications; ``result`` is set after the last one."""

    def __init__(
        self,
        session: AsyncSession,
        blocks: list[dict[str, Any]],
        callbacks: _Callbacks,
        wait_children: bool,
        timeout: float | None,
    ) -> None:
        self.session = session
        self.blocks = blocks
        self.callbacks = callbacks
        self.wait_children = wait_children
        self.timeout = timeout
        self.result: RunResult | None = None
        self._events: list[dict[str, Any]] = []
        self._notes: list[Notification] = []
        self._children: list[str] = []
        self._frames: AsyncGenerator[Notification, None] | None = None

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Notification:
        if self._frames is None:
            self._frames = self._run()
        return await anext(self._frames)

    async def aclose(self) -> None:
        """Stop collecting (unsubscribes; the turn goes on server-side)."""
        if self._frames is not None:
            await self._frames.aclose()

    async def __aenter__(self) -> RunStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[Notification, None]:
        harness = self.session.harness
        await harness.start()
        client, sid = harness.client, self.session.id
        deadline = None if self.timeout is None else asyncio.get_running_loop().time() + self.timeout
        what = f"run on session {sid}"
        deltas = harness.config.stream_deltas and "deltas" in harness.extensions
        with client.subscribe_tree(sid) as subscription:
            params = {"sessionId": sid, "contentBlocks": self.blocks}
            raw = await _within(deadline, harness.request("session/prompt", params), what)
            message_id = _validated(PromptResult, "session/prompt", raw).messageId
            received = False
            while True:
                note = await _within(deadline, subscription.next(), what)
                if not received and not is_receipt(note, sid, message_id):
                    continue
                received = True
                await self._collect(note, sid, deltas)
                yield note
                if _is_idle(note, sid):
                    break
            if self.wait_children:
                async for note in self._settle(subscription, deadline, what):
                    await self._collect(note, sid, deltas)
                    yield note
        self.result = RunResult(
            session_id=sid,
            message_id=message_id,
            final_response=outcome.final_response(self._events),
            finish_reason=finish_reason(self._events),
            events=self._events,
            notifications=self._notes,
            child_session_ids=tuple(self._children),
        )

    async def _settle(
        self, subscription: Subscription, deadline: float | None, what: str
    ) -> AsyncIterator[Notification]:
        """Frames until the ``session/wait`` response (which the server writes after all earlier frames)."""
        client = self.session.harness.client
        waiting = asyncio.ensure_future(client.request("session/wait", {"sessionId": self.session.id}))
        getting: asyncio.Future[Notification] | None = None
        try:
            while True:
                getting = asyncio.ensure_future(subscription.next())
                await _within(deadline, asyncio.wait([getting, waiting], return_when=asyncio.FIRST_COMPLETED), what)
                if not getting.done():
                    break
                yield getting.result()
            waiting.result()
            while (note := subscription.next_nowait()) is not None:
                yield note
        finally:
            waiting.cancel()
            if getting is not None:
                getting.cancel()

    async def _collect(self, note: Notification, sid: str, deltas: bool) -> None:
        self._notes.append(note)
        payload = note.payload
        await _call(self.callbacks.on_notification, note)
        if note.method == "subagent.started" and isinstance(payload.get("childSessionId"), str):
            self._children.append(payload["childSessionId"])
        if payload.get("sessionId") != sid:
            return
        if note.method == "session.event" and isinstance(payload.get("event"), dict):
            event = payload["event"]
            self._events.append(event)
            await _call(self.callbacks.on_event, event)
            if not deltas and event.get("type") == "assistant/message":
                for text in _texts(event):
                    await _call(self.callbacks.on_text, text)
        elif note.method == "session.status":
            await _call(self.callbacks.on_status, payload.get("status"))
        elif deltas and note.method == DELTA_NOTIFICATION and payload.get("blockType") == "text":
            await _call(self.callbacks.on_text, payload.get("delta"))


def _texts(event: dict[str, Any]) -> list[str]:
    data = event.get("data")
    message = data.get("message") if isinstance(data, dict) else None
    owner = message if isinstance(message, dict) else data
    content = owner.get("content") if isinstance(owner, dict) else None
    if not isinstance(content, list):
        return []
    return [
        b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]


def _is_idle(note: Notification, session_id: str) -> bool:
    payload = note.payload
    return (
        note.method == "session.status" and payload.get("sessionId") == session_id and payload.get("status") == "idle"
    )


# -- the blocking facade -----------------------------------------------------------------------


def _refuse_running_loop() -> None:
    """Blocking calls from inside an event loop would deadlock it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError("the blocking Harness cannot be used inside a running event loop; use AsyncHarness")


class _LoopThread:
    """A private event loop on one daemon thread; blocking calls hop onto it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="pydsh-sdk-client", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            _refuse_running_loop()
        except RuntimeError:
            coro.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        if not self.loop.is_closed():
            self.loop.close()


class Harness:
    """Blocking twin of :class:`AsyncHarness`, driven on a private loop thread."""

    def __init__(self, config: HarnessConfig | None = None, **kwargs: Any) -> None:
        self._async = AsyncHarness(config, **kwargs)
        self._thread = _LoopThread()

    @property
    def config(self) -> HarnessConfig:
        return self._async.config

    @property
    def server_info(self) -> dict[str, Any] | None:
        return self._async.server_info

    @property
    def extensions(self) -> tuple[str, ...]:
        return self._async.extensions

    @property
    def client(self) -> AsyncJsonRpcClient:
        return self._async.client

    def __enter__(self) -> Harness:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Spawn and ``initialize``; a failed start also stops the loop thread."""
        _refuse_running_loop()
        try:
            self._thread.call(self._async.start())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the runtime, then stop the loop thread. Idempotent."""
        if not self._thread.loop.is_closed():
            self._thread.call(self._async.close())
            self._thread.stop()

    def session(self, session_id: str | None = None) -> Session:
        return Session(self, self._async.session(session_id))

    def resume_session(self, session_id: str) -> Session:
        return Session(self, self._thread.call(self._async.resume_session(session_id)))

    def run(self, input: Input, *, session_id: str | None = None, **kwargs: Any) -> RunResult:
        return self.session(session_id).run(input, **kwargs)


class Session:
    """Blocking twin of :class:`AsyncSession`; callbacks run on the harness's loop thread."""

    def __init__(self, harness: Harness, inner: AsyncSession) -> None:
        self.harness = harness
        self._inner = inner
        self.id = inner.id

    def run(self, input: Input, **kwargs: Any) -> RunResult:
        return self.harness._thread.call(self._inner.run(input, **kwargs))

    def stream(self, input: Input, **kwargs: Any) -> SyncRunStream:
        return SyncRunStream(self.harness._thread, self._inner.stream(input, **kwargs))

    def prompt(self, input: Input) -> str:
        return self.harness._thread.call(self._inner.prompt(input))

    def wait(self, timeout: float | None = None) -> None:
        self.harness._thread.call(self._inner.wait(timeout))

    def get_working_directory(self) -> str:
        return self.harness._thread.call(self._inner.get_working_directory())

    def set_working_directory(self, path: PathLike) -> str:
        return self.harness._thread.call(self._inner.set_working_directory(path))


class SyncRunStream:
    """Blocking iterator over a :class:`RunStream`; ``close()`` (or leaving a ``with``) unsubscribes."""

    def __init__(self, thread: _LoopThread, stream: RunStream) -> None:
        self._thread = thread
        self._stream = stream

    @property
    def result(self) -> RunResult | None:
        return self._stream.result

    def __iter__(self) -> Iterator[Notification]:
        return self

    def __next__(self) -> Notification:
        try:
            return self._thread.call(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        self._thread.call(self._stream.aclose())

    def __enter__(self) -> SyncRunStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
