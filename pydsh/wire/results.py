"""Wire models of SDK JSON-RPC results (spec 06 §5), validated by the client at the trust boundary."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, StrictStr


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class ServerInfo(_Result):
    """``initialize.result.serverInfo``."""

    name: str | None = None
    version: str | None = None


class PydshInfo(_Result):
    """``initialize.result.pydsh``: our version and the extensions this connection enabled."""

    version: str | None = None
    extensions: list[str] = []


class InitializeResult(_Result):
    """``initialize`` result; ``pydsh`` is absent on the reference runtime."""

    serverInfo: ServerInfo | None = None
    pydsh: PydshInfo | None = None


class PromptResult(_Result):
    """``session/prompt`` result: the id of the queued user message."""

    messageId: StrictStr


class WorkingDirectoryResult(_Result):
    """``session/working-directory/*`` result."""

    cwd: StrictStr
