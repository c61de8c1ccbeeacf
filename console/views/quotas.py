"""Quotas: per user, client id, (user, client id) and the defaults, read and written in
ZooKeeper with change notifications."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from cluster_client.errors import OpError
from console.changes import quotas as quota_ops
from console.changes.validation import QUOTA_KEYS
from console.roles import VIEWER, role_required
from console.views.common import attempt, page, unavailable
from livefeed import history


@role_required(VIEWER)
def quota_list(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    try:
        rows = quota_ops.list_all()
    except OpError as exc:
        return unavailable(request, "console/quotas.html", exc)
    context = {
        "throttled": throttled_clients(history.all_broker_metrics()),
        "quotas": rows,
        "keys": list(QUOTA_KEYS),
        "errors": errors or {},
        "form": request.POST if request.method == "POST" else {},
    }
    return page(request, "console/quotas.html", context, ["cluster"], status=status)


def throttled_clients(readings: dict[int, dict]) -> list[dict]:
    """Per (quota type, user, client-id): throttle time now (the largest over brokers,
    Kafka's throttle-time sensor) and the throttle time given in all, from the brokers'
    /metrics as the monitor last read them."""
    rows: dict[tuple, dict] = {}
    for broker_id, reading in sorted(readings.items()):
        for t in (reading.get("throttle") or {}).values():
            key = (t["type"], t["user"], t["client_id"])
            row = rows.setdefault(key, {**t, "throttle_ms": 0.0, "total_ms": 0.0, "brokers": []})
            row["throttle_ms"] = max(row["throttle_ms"], t.get("throttle_ms", 0.0))
            row["total_ms"] += t.get("total_ms", 0.0)
            row["brokers"].append(broker_id)
    return [rows[k] for k in sorted(rows)]


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
