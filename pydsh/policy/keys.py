"""Keys of the services the ``policy`` package provides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydsh.kernel.keys import ServiceKey

if TYPE_CHECKING:
    from pydsh.policy.approval import Approval
    from pydsh.policy.permissions import Permissions
    from pydsh.policy.questions import UserQuestions
    from pydsh.policy.sandbox import Sandbox

APPROVAL: ServiceKey[Approval] = ServiceKey("approval")
PERMISSIONS: ServiceKey[Permissions] = ServiceKey("permissions")
SANDBOX: ServiceKey[Sandbox] = ServiceKey("sandbox")
USER_QUESTIONS: ServiceKey[UserQuestions] = ServiceKey("user_questions")
