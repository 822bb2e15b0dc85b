"""Keys of the services the ``images`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.images.store import AttachmentStore

ATTACHMENTS: ServiceKey[AttachmentStore] = ServiceKey("attachments")
"""The durable image store below ``$DSH_HOME/attachments/v1`` (the reference's layout)."""
