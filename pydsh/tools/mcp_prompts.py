"""An MCP server's prompts as ``/`` commands: listing them and turning one into the text of a user prompt.

The ``mcp-client`` lists a server's prompts (``prompts/list``, every page) after each tool sync when the
server declares the capability, and registers them with the ``mcpResources`` service as commands named like
its tools (``mcp__<server>__<prompt>``); running one is a ``prompts/get``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

MAX_PROMPT_PAGES = 100


async def list_prompts(session: ClientSession) -> list[Any]:
    """Every prompt the server lists; none when it has no prompts capability."""
    import mcp_types as types

    capabilities = session.server_capabilities
    if capabilities is None or capabilities.prompts is None:
        return []
    prompts: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PROMPT_PAGES):
        page = await session.list_prompts(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        prompts.extend(page.prompts)
        cursor = page.next_cursor
        if cursor is None:
            break
    return prompts


def prompt_text(result: Any) -> str:
    """The messages of a ``prompts/get`` result as one prompt: each message's text, blank-line separated
    (a resource's text as it is, anything else as its JSON)."""
    parts = []
    for message in result.messages:
        content = message.content.model_dump(by_alias=True, mode="json", exclude_none=True)
        if content.get("type") == "text":
            parts.append(content["text"])
        elif content.get("type") == "resource" and "text" in content.get("resource", {}):
            parts.append(content["resource"]["text"])
        else:
            parts.append(json.dumps(content, ensure_ascii=False))
    return "\n\n".join(parts)
