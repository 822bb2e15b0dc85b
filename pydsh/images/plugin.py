"""Plugin ``attachment-local``: the image store under ``$DSH_HOME``, the image projection of requests, and the
offload of the oldest images when a request would exceed the route's image budget."""

from __future__ import annotations

from pydsh.images.keys import ATTACHMENTS
from pydsh.images.offload import Budget
from pydsh.images.request import Projection, projector
from pydsh.images.store import AttachmentStore
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.config import BaseModel, ConfigDict, Field
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM
from pydsh.session.keys import SESSIONS
from pydsh.session.log import Session

name = "attachment-local"
inject = (LLM,)
optional = (SESSIONS,)


class Config(BaseModel):
    """The inline image budget of one request (the reference's DeepSeek defaults) and its removal steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    maxImagesPerRequest: int = Field(default=Budget.max_images, ge=1)
    maxInlineRequestImageBytes: int = Field(default=Budget.max_bytes, ge=1)
    imageOffloadCountQuantum: int = Field(default=Budget.count_quantum, ge=1)
    inlineImageOffloadByteQuantum: int = Field(default=Budget.byte_quantum, ge=1)

    def budget(self) -> Budget:
        return Budget(
            self.maxImagesPerRequest,
            self.maxInlineRequestImageBytes,
            self.imageOffloadCountQuantum,
            self.inlineImageOffloadByteQuantum,
        )


def apply(ctx: Context, config: Config) -> None:
    """Provide the store and project image blocks of every model request."""
    store = AttachmentStore(dsh_home())
    ctx.provide(ATTACHMENTS, store)
    llm = ctx.require(LLM)

    async def vision(provider: str, model: str) -> bool:
        if not llm.has_adapter(provider):
            return False
        return "image" in ((await llm.resolve_model_info(provider, model)).get("inputModalities") or ())

    def session_of(session_id: str) -> Session | None:
        sessions = ctx.get(SESSIONS)
        return sessions.get(session_id) if sessions is not None else None

    llm.add_projection(ctx, projector(Projection(store), vision, session_of, config.budget()))
