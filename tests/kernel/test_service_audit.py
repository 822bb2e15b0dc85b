"""Realm owners and the ``kernel/service-provided`` hook used by audits."""

from __future__ import annotations

import pytest

from pydsh.kernel import Kernel
from pydsh.kernel.context import SERVICE_PROVIDED
from pydsh.kernel.errors import KernelError
from pydsh.kernel.keys import ServiceKey


async def test_owners_follow_provide_and_a_raising_listener_fails_the_provider() -> None:
    kernel = Kernel()
    ctx = kernel.ctx
    seen: list[tuple[str, object]] = []
    ctx.on(SERVICE_PROVIDED, lambda name, realm, fiber: seen.append((name, fiber)))
    dispose = ctx.provide(ServiceKey("thing"), object())
    root = kernel.runtime.root_realm
    assert root.owners["thing"] is kernel.fiber
    assert seen == [("thing", kernel.fiber)]
    await dispose()
    assert "thing" not in root.owners and "thing" not in root.names()

    def refuse(name: str, realm: object, fiber: object) -> None:
        raise KernelError("REFUSED", name)

    ctx.on(SERVICE_PROVIDED, refuse)
    with pytest.raises(KernelError, match="other"):
        ctx.provide(ServiceKey("other"), object())
    await kernel.dispose()
