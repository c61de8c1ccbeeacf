"""Every change the console can make, shared by the UI and the API: check the role,
validate the input (OpError with field errors, nothing sent to the cluster), apply it
through cluster_client, and write the audit log (who, what, before, after)."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_client.errors import OpError
from console import audit
from console.roles import has_role


@dataclass
class Actor:
    user: object
    source: str = "ui"  # ui | api

    def require(self, role: str) -> None:
        if not has_role(self.user, role):
            raise OpError(f"This needs the {role} role.", status=403)

    def done(self, action: str, target: str, before=None, after=None) -> None:
        audit.record(self.user, self.source, action, target, before, after)

    def failed(self, action: str, target: str, error: OpError, before=None, after=None):
        """Refusals by the cluster are audited too; input errors and 403s are not changes."""
        audit.record(
            self.user, self.source, action, target, before, after, ok=False, detail=error.message
        )
