"""The audit log page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from console import audit
from console.roles import VIEWER, role_required
from console.views.common import page


@role_required(VIEWER)
def audit_log(request: HttpRequest) -> HttpResponse:
    q = request.GET
    rows = audit.entries(q.get("action", ""), q.get("target", ""), q.get("user", ""), 500)
    return page(request, "console/audit.html", {"entries": rows, "q": q})
