"""The MCP client: external tool servers mounted as model-facing tools (spec 11 Part B).

One ``mcp-client`` row per server, or :func:`mount_servers` for servers a frontend declares per
session (the ACP bridge). Each server is one :class:`McpServer`: a task owning the connection (one
:class:`~pydsh.tools.mcp_connection.Generation` per attempt), the registered tools of the last
successful sync and the ``mcp:<serverName>`` prompt section. What a server may make pydsh hold or
send is bounded in :mod:`pydsh.tools.mcp_limits`; the servers of ``mcp.json`` files are the
``mcp-servers`` row of :mod:`pydsh.tools.mcp_files`. The ``mcp`` package is imported only when a
server starts; without it a row warns once and contributes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from pydsh.agent.keys import SYSTEM_PROMPT
from pydsh.contract.tools import TOOLS, ToolDefinition, ToolError, ToolExec, ToolOutcome, text
from pydsh.kernel.context import Context
from pydsh.kernel.errors import PydshError
from pydsh.kernel.fiber import Disposer
from pydsh.mcp_resources.keys import MCP_RESOURCES
from pydsh.mcp_resources.service import PromptCommand
from pydsh.policy.keys import APPROVAL, SANDBOX
from pydsh.tools.mcp_config import (
    McpConfigError,
    McpServerConfig,
    normalize_server_name,
    parse_config,
    public_tool_name,
)
from pydsh.tools.mcp_connection import CLOSE_CONFIRM_S, Generation, describe
from pydsh.tools.mcp_files import McpServersFile
from pydsh.tools.mcp_limits import (
    DROPPED_META,
    Bounds,
    Refusal,
    ResultText,
    ToolBudget,
    definition_bytes,
    project_content,
    project_item,
    refusal_code,
)
from pydsh.tools.mcp_prompts import list_prompts, prompt_text

if TYPE_CHECKING:
    from mcp import ClientSession, MCPError

__all__ = [
    "McpConfigError",
    "McpServer",
    "McpServersFile",
    "McpUnavailableError",
    "mount_servers",
    "normalize_server_name",
    "parse_config",
    "project_content",
    "project_item",
    "public_tool_name",
]

log = logging.getLogger("pydsh.tools.mcp")

MCP_SERVERS_ORDER = 3100
INSTALL_HINT = "pip install 'pydsh[mcp]'"
CLOSE_GRACE_S = 3.0
"""How long a closing server may take to leave its connection normally (an HTTP session's ``DELETE``)."""
MAX_LIST_PAGES = 1000


class McpUnavailableError(PydshError, RuntimeError):
    """The optional ``mcp`` package is not installed."""


class McpRequestError(PydshError, RuntimeError):
    """A request the client made for a command (``prompts/get``) failed; the message says how."""


# -- one server ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server listed it, with its public name; ``read_only`` only when the server says so."""

    public: str
    raw: str
    description: str
    parameters: dict[str, Any]
    task_required: bool
    read_only: bool = False


_LIVE: weakref.WeakKeyDictionary[object, dict[tuple[int, str], McpServer]] = weakref.WeakKeyDictionary()
"""Live servers per runtime, keyed by (registration scope identity, serverName)."""

READ_ONLY_DENIED = 'tool "{name}" is denied under read-only mode: its MCP server does not mark it read-only'
READ_ONLY_TEXTS = {
    "unavailable": READ_ONLY_DENIED + ", and no approval channel is available to allow it",
    "never": READ_ONLY_DENIED + ", and approval prompts are disabled in this session",
    "rejected": (
        'the user rejected running tool "{name}" under read-only mode; it stays denied, '
        "so stop and explain instead of working around it"
    ),
    "cancelled": 'approval for tool "{name}" was cancelled',
}


class McpServer:
    """One configured server: its connection task, its registered tools and its instructions section.

    Also the ``mcp-client`` plugin (class form): the row's fiber instance is its server.
    """

    inject = (TOOLS,)
    optional = (SYSTEM_PROMPT, MCP_RESOURCES)
    Config = McpServerConfig

    def __init__(self, ctx: Context, config: McpServerConfig, *, cwd: str | None = None) -> None:
        self.ctx = ctx
        self.config = config
        self.server_name = config.serverName
        self.label = f"mcp-client({self.server_name})"
        self.cwd = config.cwd or cwd or os.getcwd()
        self.tools: list[ListedTool] = []
        self.instructions: str | None = None
        self.session: ClientSession | None = None
        self.closed = False
        self._registered: list[Disposer] = []
        self._effects: list[Disposer] = []
        self._signature: list[tuple[str, str, str, Any, bool, bool]] | None = None
        self._dropped: list[str] = []
        self._sync_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._first: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._generation: Generation | None = None
        self._key = (id(ctx.scope), self.server_name)
        self._late = False
        self._withdraw_prompts: Callable[[], None] | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect and wait for the first attempt as :meth:`ready` says. Without the ``mcp`` package,
        warn once and contribute nothing."""
        if self.launch():
            await self.ready()

    def launch(self) -> bool:
        """Claim the name, register the instructions section and start connecting; ``False`` without ``mcp``."""
        if not mcp_available():
            _warn_missing()
            return False
        live = _LIVE.setdefault(self.ctx.runtime, {})
        if self._key in live:
            raise RuntimeError(
                f'mcp-client: serverName "{self.server_name}" is already in use by another mcp-client instance — '
                "pick a unique serverName in the profile"
            )
        live[self._key] = self
        self._effects.append(self.ctx.register(self.close))
        prompt = self.ctx.get(SYSTEM_PROMPT)
        if prompt is not None:
            name = f"mcp:{self.server_name}"
            self._effects.append(prompt.section(self.ctx, name, MCP_SERVERS_ORDER, self._section, interpolate=False))
        resources = self.ctx.get(MCP_RESOURCES)
        if resources is not None:
            self._effects.append(self.ctx.register(resources.register(self.ctx, self.server_name, self)))
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.label)
        self._task.add_done_callback(self._ended)
        return True

    async def ready(self) -> None:
        """Wait for the first attempt: in full with ``failOnStartupError`` (a failure then raises), else at
        most ``startupWaitMs``; a server not ready by then keeps connecting and its tools arrive later."""
        strict = self.config.failOnStartupError
        try:
            error = await asyncio.wait_for(
                asyncio.shield(self._first), None if strict else self.config.startupWaitMs / 1000
            )
        except TimeoutError:
            self._late = True
            log.warning(
                "%s: not connected within startupWaitMs (%dms); connecting in the background, its tools are added "
                "when it is ready",
                self.label,
                self.config.startupWaitMs,
            )
            return
        if error is None:
            return
        if strict:
            await self.close()
            raise RuntimeError(f"{self.label}: initial connection or tool synchronization failed") from error
        log.warning("%s: initial connection failed: %s", self.label, describe(error))

    async def close(self) -> None:
        """Stop the connection task (the server process is terminated, an HTTP session ended) and drop the tools."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            await self._end(task)
        if self._generation is not None:
            self._generation.release()
        self._unregister()
        self._offer_prompts([])
        self.instructions = None
        live = _LIVE.get(self.ctx.runtime)
        if live is not None and live.get(self._key) is self:
            del live[self._key]
        for effect in reversed(self._effects):
            await effect()  # the section's removal, and this method's own entry (a no-op now)
        self._effects.clear()

    async def _end(self, task: asyncio.Task[None]) -> None:
        """Let the connection end normally for up to ``CLOSE_GRACE_S``, then cancel it."""
        generation = self._generation
        if not task.done() and generation is not None:
            generation.stop()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_GRACE_S)
            except TimeoutError:
                if self._generation is not None:
                    self._generation.cancel()
                await task

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not self._first.done():
            self._first.set_result(RuntimeError(f"{self.label}: the connection task ended before connecting"))

    def connected(self, session: ClientSession, instructions: str) -> None:
        """A generation is up: route calls to ``session`` and show its instructions."""
        self.instructions = instructions or None
        self.session = session
        if self._late:
            self._late = False
            log.info("%s: connected after startup with %d tools", self.label, len(self.tools))
        if not self._first.done():
            self._first.set_result(None)

    def _section(self, agent: Any) -> str | None:
        if not self.instructions:
            return None
        return f"### MCP server: {self.server_name}\n\n{self.instructions}"

    def bounds(self) -> Bounds:
        """What one message of this server may make pydsh keep (see :mod:`pydsh.tools.mcp_limits`)."""
        config = self.config
        return Bounds(
            config.maxMessageBytes,
            config.maxResultBytes,
            lambda: ToolBudget(config.maxTools, config.maxToolDefinitionBytes),
            self._measure,
            _content_block,
        )

    def _measure(self, raw: str, description: str, parameters: Any) -> int:
        """The bytes the tool ``raw`` adds to every request, under its public name."""
        return definition_bytes(public_tool_name(self.server_name, raw), description, parameters)

    # -- the connection task --------------------------------------------------------------------

    async def _run(self) -> None:
        """Connect, serve until the connection drops, reconnect with backoff (spec 11 §B.6)."""
        reconnect = self.config.reconnect
        attempt = 0
        ever_connected = False
        while not self._stop.is_set():
            generation = Generation(self)
            self._generation = generation
            error = await generation.run()
            if not self._first.done():
                self._first.set_result(error)
            ever_connected = ever_connected or generation.connected_at is not None
            if not await generation.confirm_closed():
                log.error(
                    "%s: the server process did not exit within %.0fs of closing its connection — not reconnecting "
                    "(never two server processes for one name)",
                    self.label,
                    CLOSE_CONFIRM_S,
                )
                return
            if self._stop.is_set():
                return
            if error is not None and not ever_connected and self.config.failOnStartupError:
                return
            if generation.uptime_ms() >= reconnect.maxDelayMs:
                attempt = 0
            attempt += 1
            if not reconnect.enabled:
                log.error("%s: connection ended and reconnect is disabled: %s", self.label, describe(error))
                return
            if attempt > reconnect.maxAttempts:
                self._give_up()
                return
            delay = reconnect.delay_ms(attempt)
            what = "connection lost; reconnecting" if ever_connected else "connection failed; retrying"
            detail = f": {describe(error)}" if error is not None else ""
            log.warning(
                "%s: %s in %dms (attempt %d/%d)%s", self.label, what, delay, attempt, reconnect.maxAttempts, detail
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay / 1000)

    def _give_up(self) -> None:
        self._unregister()
        self._offer_prompts([])
        self.instructions = None
        log.error(
            "%s: giving up after %d consecutive failed reconnect attempts — tools unregistered; "
            "reload the plugin or restart to reconnect",
            self.label,
            self.config.reconnect.maxAttempts,
        )

    # -- tool sync ------------------------------------------------------------------------------

    async def sync(self, session: ClientSession) -> None:
        """List every tool, build the next generation, then swap it in; a failure keeps the current one."""
        async with self._sync_lock:
            listed, budget = await self._list(session)
            generation = self._build(listed)
            if self.closed or not self.ctx.fiber.accepts_effects:
                return
            self._swap(generation)
            if budget.dropped != self._dropped:
                self._dropped = budget.dropped
                if budget.dropped:
                    log.warning("%s", budget.warning(self.label))

    async def _list(self, session: ClientSession) -> tuple[list[Any], ToolBudget]:
        """Every page of the listing, keeping only the tools within the budget (a page of thousands is
        never held whole: see :func:`~pydsh.tools.mcp_limits.bound_message`)."""
        import mcp_types as types
        from mcp import MCPError

        budget = ToolBudget(self.config.maxTools, self.config.maxToolDefinitionBytes)
        capabilities = session.server_capabilities
        if capabilities is None or capabilities.tools is None:
            return [], budget
        kept: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            try:
                page = await session.list_tools(params=params)
            except MCPError as exc:
                raise RuntimeError(f"{self.label}: tools/list {self._request_failure(exc)}") from None
            for tool in page.tools:
                if budget.admit(tool.name, self._measure(tool.name, tool.description or "", tool.input_schema)):
                    kept.append(tool)
            budget.dropped.extend((page.meta or {}).get(DROPPED_META) or ())
            cursor = page.next_cursor
            if cursor is None:
                return kept, budget
        raise RuntimeError(f"{self.label}: the tool list did not end after {MAX_LIST_PAGES} pages")

    def _request_failure(self, exc: MCPError) -> str:
        """The rest of ``<label>: tools/list …`` for a failed listing request."""
        if refusal_code(exc.error.data) is not None:
            return exc.error.message
        return f"failed: {exc.error.message}"

    def _build(self, listed: list[Any]) -> list[ListedTool]:
        seen: dict[str, str] = {}
        out: list[ListedTool] = []
        for tool in listed:
            raw = tool.name
            if raw in seen:
                raise RuntimeError(f'{self.label}: server listed tool "{raw}" more than once — invalid tool list')
            public = public_tool_name(self.server_name, raw)
            if public in seen.values():
                raise RuntimeError(f'{self.label}: two tools map to the public name "{public}" — invalid tool list')
            seen[raw] = public
            schema = dict(tool.input_schema)
            if schema.get("type") != "object":
                raise RuntimeError(f'{self.label}: tool "{raw}" has no object-rooted inputSchema — invalid tool list')
            execution = tool.execution
            required = execution is not None and execution.task_support == "required"
            read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
            out.append(ListedTool(public, raw, tool.description or "", schema, required, read_only))
        return out

    def _swap(self, generation: list[ListedTool]) -> None:
        signature = [(t.public, t.raw, t.description, t.parameters, t.task_required, t.read_only) for t in generation]
        if signature == self._signature:
            return
        self._unregister()
        registry = self.ctx.require(TOOLS)
        registered: list[Disposer] = []
        try:
            for tool in generation:
                registered.append(registry.register(self.ctx, self._definition(tool)))
        except Exception as exc:
            for dispose in registered:
                dispose()
            log.error("%s: tool registration failed, no tools registered: %s", self.label, exc)
            return
        self._registered = registered
        self.tools = generation
        self._signature = signature

    def _unregister(self) -> None:
        registered, self._registered = self._registered, []
        for dispose in registered:
            dispose()
        self.tools = []
        self._signature = None

    # -- prompts as commands --------------------------------------------------------------------

    async def sync_prompts(self, session: ClientSession) -> None:
        """Offer the server's prompts as commands, before its tools are synced so both are there when it is
        ready (none if listing them fails: they are optional)."""
        try:
            prompts = await list_prompts(session)
        except Exception as exc:
            log.warning("%s: prompts/list failed, no prompt commands: %s", self.label, describe(exc))
            prompts = []
        if not self.closed and self.ctx.fiber.accepts_effects:
            self._offer_prompts(prompts)

    def _offer_prompts(self, prompts: list[Any]) -> None:
        """Replace this server's ``/mcp__…`` commands in the ``mcpResources`` service."""
        withdraw, self._withdraw_prompts = self._withdraw_prompts, None
        if withdraw is not None:
            withdraw()
        service = self.ctx.get(MCP_RESOURCES)
        if service is None or not prompts:
            return
        commands = [self._command(prompt) for prompt in prompts]
        self._withdraw_prompts = service.register_prompts(self.ctx, commands)

    def _command(self, prompt: Any) -> PromptCommand:
        arguments = prompt.arguments or []
        return PromptCommand(
            public_tool_name(self.server_name, prompt.name),
            self.server_name,
            prompt.name,
            prompt.description or prompt.title or f"MCP prompt {prompt.name} of server {self.server_name}",
            tuple(a.name for a in arguments),
            frozenset(a.name for a in arguments if a.required),
            self,
        )

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        """``prompts/get`` as the text of a user prompt, within ``toolCallTimeoutMs``."""
        import mcp_types as types
        from mcp import MCPError

        session = self.session
        if session is None:
            raise McpRequestError(f"{self.label}: server is disconnected")
        try:
            result = await asyncio.wait_for(session.get_prompt(name, arguments), self.config.toolCallTimeoutMs / 1000)
        except TimeoutError:
            raise McpRequestError(f"MCP error {types.REQUEST_TIMEOUT}: Request timed out") from None
        except MCPError as exc:
            raise McpRequestError(f"MCP error {exc.error.code}: {exc.error.message}") from None
        return prompt_text(result)

    def _definition(self, tool: ListedTool) -> ToolDefinition:
        async def execute(args: Any, exec: ToolExec) -> ToolOutcome:
            return await self.call(tool, args, exec)

        return ToolDefinition(tool.public, tool.description, tool.parameters, execute)

    # -- calls ----------------------------------------------------------------------------------

    async def call(self, tool: ListedTool, args: Any, exec: ToolExec) -> ToolOutcome:
        """One ``tools/call`` with the validated arguments; failures raise :class:`ToolError`."""
        from mcp import MCPError

        raw = tool.raw
        if tool.task_required:
            raise ToolError(
                f'Tool "{raw}" requires task-based execution, which this bridge does not support', "MCP_TASK_REQUIRED"
            )
        await self._permit(tool, exec)
        session = self.session
        if session is None:
            raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED")
        timeout_ms = self.config.toolCallTimeoutMs
        arguments = args if isinstance(args, dict) else {}
        started = time.monotonic()
        try:
            result = await session.call_tool(raw, arguments, read_timeout_seconds=timeout_ms / 1000)
        except MCPError as exc:
            raise self._call_error(raw, exc, session, time.monotonic() - started) from None
        except ValidationError as exc:
            raise _invalid_result(raw, _issues(exc)) from None
        except RuntimeError as exc:
            raise _invalid_result(raw, str(exc)) from None
        except Exception as exc:
            if self._lost(session):
                raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED") from None
            raise ToolError(f'{self.label}: tool "{raw}" failed: {describe(exc)}', "MCP_ERROR") from None
        return self._outcome(raw, result)

    def _call_error(self, raw: str, exc: MCPError, session: ClientSession, elapsed_s: float) -> ToolError:
        """A failed call as the model should read it: the SDK's own timeout and connection end are told
        apart from a server's error that merely shares their code."""
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        error = exc.error
        refused = refusal_code(error.data)
        if refused is not None:
            return ToolError(f'Tool "{raw}" {error.message}', refused)
        timeout_ms = self.config.toolCallTimeoutMs
        if error.code == REQUEST_TIMEOUT and elapsed_s * 1000 >= timeout_ms:
            return ToolError(f"{self.label}: tool call timed out after {timeout_ms}ms", "MCP_TIMEOUT")
        if error.code == CONNECTION_CLOSED and self._lost(session):
            return ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED")
        return ToolError(f'{self.label}: tool "{raw}" failed: {error.message}', "MCP_ERROR")

    def _lost(self, session: ClientSession) -> bool:
        """Whether ``session``'s connection is over (so a failure on it means the server went away)."""
        generation = self._generation
        return self.session is not session or generation is None or generation.lost

    def _outcome(self, raw: str, result: Any) -> ToolOutcome:
        """The result as one text block, assembled item by item up to ``maxResultBytes``."""
        assembled = ResultText(self.config.maxResultBytes)
        for block in result.content:
            assembled.add(project_item(block.model_dump(by_alias=True, mode="json", exclude_none=True)))
        try:
            projected = assembled.text() if result.content else project_content(raw, [])
        except Refusal as refusal:
            raise ToolError(f'Tool "{raw}" {refusal.text}', refusal.code) from None
        meta: dict[str, Any] = {"server": self.server_name, "tool": raw}
        if result.structured_content is not None:
            meta["structuredContent"] = result.structured_content
        if result.is_error:
            return ToolOutcome(text(f"Error: {projected}"), True, None, meta)
        return ToolOutcome(text(projected), False, None, meta)

    async def resource_request(self, method: str, params: dict[str, Any], exec: ToolExec) -> dict[str, Any]:
        """One ``resources/*`` request for the ``mcp-resources`` tools, within ``toolCallTimeoutMs``: the result
        as the server sent it (a listing without a cursor gathers every page, as the reference's client does);
        a failure raises :class:`ToolError` with the server's message."""
        import mcp_types as types
        from mcp import MCPError

        session = self.session
        if session is None:
            raise ToolError(f"{self.label}: server is disconnected", "MCP_DISCONNECTED")
        timeout = self.config.toolCallTimeoutMs / 1000
        try:
            return await asyncio.wait_for(_resource_result(session, method, params), timeout)
        except TimeoutError:
            raise ToolError(f"MCP error {types.REQUEST_TIMEOUT}: Request timed out") from None
        except MCPError as exc:
            raise ToolError(exc.error.message) from None

    async def _permit(self, tool: ListedTool, exec: ToolExec) -> None:
        """Under read-only mode a tool its server does not mark read-only runs only with the user's approval,
        asked like a built-in tool's escalation (the sandbox cannot confine another process's writes)."""
        sandbox = self.ctx.get(SANDBOX)
        if tool.read_only or sandbox is None or sandbox.mode(exec.session) != "read-only":
            return
        name = exec.name
        approval = self.ctx.get(APPROVAL)
        if approval is None or exec.agent is None:
            raise ToolError(READ_ONLY_TEXTS["unavailable"].format(name=name), "MCP_SANDBOX_DENIED")
        outcome = await approval.request(
            exec.agent,
            name,
            call_id=exec.call_id,
            reason=f"run {name} under read-only mode: its MCP server does not mark it read-only",
            display_reason={"en": f"Allow {name}, which may change files or other state, in this read-only session"},
            signal=exec.signal,
        )
        if outcome == "allowed-once":
            return
        if outcome == "rejected" and approval.policy(exec.agent.session) == "never":
            outcome = "never"
        message = READ_ONLY_TEXTS.get(outcome, READ_ONLY_TEXTS["unavailable"])
        raise ToolError(message.format(name=name), "MCP_SANDBOX_DENIED")


LISTED = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}


async def _resource_result(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/read``, or a listing: the page after ``cursor``, else every page merged into the first."""
    if method == "resources/read":
        return _as_sent(await session.read_resource(str(params["uri"])))
    if "cursor" in params:
        return _as_sent(await _resource_page(session, method, params["cursor"]))
    first = _as_sent(await _resource_page(session, method, None))
    key = LISTED[method]
    for _ in range(MAX_LIST_PAGES):
        cursor = first.pop("nextCursor", None)
        if cursor is None:
            return first
        page = _as_sent(await _resource_page(session, method, cursor))
        first[key] = [*first.get(key, []), *page.get(key, [])]
        if "nextCursor" in page:
            first["nextCursor"] = page["nextCursor"]
    raise ToolError(f"{method}: the listing did not end after {MAX_LIST_PAGES} pages")


async def _resource_page(session: ClientSession, method: str, cursor: str | None) -> Any:
    import mcp_types as types

    paging = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    if method == "resources/list":
        return await session.list_resources(params=paging)
    return await session.list_resource_templates(params=paging)


def _as_sent(result: Any) -> dict[str, Any]:
    """A result's members as the server sent them (defaults the SDK fills in are left out)."""
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_unset=True, exclude_none=True)
    return dumped


_CONTENT_BLOCK: Any = None


def _content_block(item: Any) -> Mapping[str, Any]:
    """One content item validated as the ``mcp`` package would, in its JSON form (``ValueError`` if invalid)."""
    global _CONTENT_BLOCK
    if _CONTENT_BLOCK is None:
        import mcp_types as types
        from pydantic import TypeAdapter

        _CONTENT_BLOCK = TypeAdapter(types.ContentBlock)
    dumped: Mapping[str, Any] = _CONTENT_BLOCK.validate_python(item).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    return dumped


def _invalid_result(raw_name: str, issues: str) -> ToolError:
    return ToolError(f'Tool "{raw_name}" returned an invalid MCP result: {issues}', "MCP_INVALID_RESULT")


def _issues(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(result)'}: {err['msg']}" for err in exc.errors())


# -- availability of the extra ------------------------------------------------------------------

_warned_missing = False


def mcp_available() -> bool:
    """Whether the optional ``mcp`` package can be imported (imports it)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def _warn_missing() -> None:
    global _warned_missing
    if not _warned_missing:
        _warned_missing = True
        log.warning(
            "mcp-client: MCP servers need the optional mcp package (%s); running without MCP tools", INSTALL_HINT
        )


# -- entry points -------------------------------------------------------------------------------


async def mount_servers(
    ctx: Context, servers: Sequence[McpServerConfig | Mapping[str, Any]], *, cwd: str | None = None
) -> Disposer:
    """Connect ``servers`` and register their tools and instructions in ``ctx``'s scope.

    Stable API for frontends that mount servers per session (the ACP bridge passes the agent's
    scope context and the session cwd, the default ``cwd`` of stdio servers). Every spec is
    validated before anything connects (:class:`McpConfigError`); a missing ``mcp`` package raises
    :class:`McpUnavailableError`. The servers connect at once, together; a server that fails its first
    attempt with ``failOnStartupError`` unwinds them all and raises. The returned disposer (``await disposer()``) closes
    them all, terminating their processes; it also runs when ``ctx``'s fiber unwinds.
    """
    configs = [parse_config(spec) for spec in servers]
    names = [c.serverName for c in configs]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise McpConfigError(f'mcp server config: serverName "{duplicate}" is listed twice')
    if configs and not mcp_available():
        raise McpUnavailableError(f"MCP servers need the optional mcp package: {INSTALL_HINT}")
    mounted: list[McpServer] = []

    async def unmount() -> None:
        errors: list[Exception] = []
        for server in reversed(mounted):
            try:
                await server.close()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise ExceptionGroup("closing MCP servers failed", errors)

    disposer = ctx.register(unmount)
    try:
        for config in configs:
            server = McpServer(ctx, config, cwd=cwd)
            mounted.append(server)
            server.launch()
        results = await asyncio.gather(*(server.ready() for server in mounted), return_exceptions=True)
        failed = next((result for result in results if isinstance(result, BaseException)), None)
        if failed is not None:
            raise failed
    except BaseException:
        await disposer()
        raise
    return disposer
