"""Quotas: per user, client id, (user, client id) and the defaults, read and written in
ZooKeeper with change notifications."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.errors import OpError
from console.ops import quotas as quota_ops
from console.ops.validation import QUOTA_KEYS
from console.roles import VIEWER, role_required
from console.views.common import attempt, page, unavailable


@role_required(VIEWER)
def quota_list(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    try:
        rows = quota_ops.list_all()
    except OpError as exc:
        return unavailable(request, "console/quotas.html", exc)
    context = {
        "quotas": rows,
        "keys": list(QUOTA_KEYS),
        "errors": errors or {},
        "form": request.POST if request.method == "POST" else {},
    }
    return page(request, "console/quotas.html", context, ["cluster"], status=status)


@require_POST
@role_required(VIEWER)
def quota_set(request: HttpRequest) -> HttpResponse:
    user = request.POST.get("user", "")
    client = request.POST.get("client", "")
    if request.POST.get("action") == "delete":
        _, err = attempt(request, quota_ops.delete, user, client, success="Removed the quota.")
    else:
        values = {k: request.POST.get(k, "") for k in QUOTA_KEYS}
        _, err = attempt(
            request,
            quota_ops.set_quotas,
            user,
            client,
            values,
            success="Saved the quota; brokers are notified.",
        )
    if err:
        return quota_list(request, err.errors, err.status)
    return redirect("quotas")
