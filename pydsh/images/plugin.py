"""Plugin ``attachment-local``: the image store under ``$DSH_HOME`` and the image projection of requests."""

from __future__ import annotations

from pydsh.images.keys import ATTACHMENTS
from pydsh.images.request import Projection, projector
from pydsh.images.store import AttachmentStore
from pydsh.kernel.compose import dsh_home
from pydsh.kernel.context import Context
from pydsh.llm.keys import LLM

name = "attachment-local"
inject = (LLM,)


def apply(ctx: Context, config: None) -> None:
    """Provide the store and project image blocks of every model request."""
    store = AttachmentStore(dsh_home())
    ctx.provide(ATTACHMENTS, store)
    llm = ctx.require(LLM)

    async def vision(provider: str, model: str) -> bool:
        if not llm.has_adapter(provider):
            return False
        return "image" in ((await llm.resolve_model_info(provider, model)).get("inputModalities") or ())

    llm.add_projection(ctx, projector(Projection(store), vision))
