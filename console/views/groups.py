"""Consumer groups: list, detail (members, lag in records and time, status, lag chart)
and offset reset (dry run, then confirm)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from alerts import service as alert_service
from cluster_client.errors import NotFound, OpError
from console.changes import groups as group_ops
from console.roles import VIEWER, role_required
from console.views.common import attempt, page, unavailable
from livefeed import groups as live_groups
from livefeed import history


@role_required(VIEWER)
def group_list(request: HttpRequest) -> HttpResponse:
    try:
        rows = group_ops.summaries()
    except OpError as exc:
        return unavailable(request, "console/groups.html", exc, subs=["groups"])
    return page(
        request,
        "console/groups.html",
        {"groups": rows, "monitor_age": history.monitor_age()},
        ["groups"],
    )


@role_required(VIEWER)
def group_detail(
    request: HttpRequest, group_id: str, plan=None, errors=None, status=200
) -> HttpResponse:
    subs = [live_groups.group_sub(group_id)]
    try:
        group = group_ops.detail(group_id)
    except NotFound as exc:
        messages.error(request, exc.message)
        return redirect("groups")
    except OpError as exc:
        return unavailable(request, "console/group.html", exc, {"group_id": group_id}, subs)
    series = history.lag_series(group_id)
    context = {
        "group": group,
        "group_id": group_id,
        "series": series,
        "plan": plan,
        "errors": errors or {},
        "form": request.POST if request.method == "POST" else {},
        "strategies": group_ops.STRATEGIES,
        "monitor_age": history.monitor_age(),
        "alert_events": alert_service.history(group_id, 50),
    }
    return page(request, "console/group.html", context, subs, status=status)


@require_POST
@role_required(VIEWER)
def group_reset(request: HttpRequest, group_id: str) -> HttpResponse:
    confirm = request.POST.get("confirm") == "yes"
    result, err = attempt(
        request,
        group_ops.reset,
        group_id,
        request.POST.get("topic", ""),
        request.POST.get("partitions", ""),
        request.POST.get("strategy", ""),
        request.POST.get("value", ""),
        dry_run=not confirm,
    )
    if err:
        return group_detail(request, group_id, errors=err.errors, status=err.status)
    if confirm:
        moved = len(result["partitions"])
        messages.success(
            request, f"Reset {moved} partition(s) of {group_id} ({result['strategy']})."
        )
        return redirect("group", group_id=group_id)
    return group_detail(request, group_id, plan=result)


@require_POST
@role_required(VIEWER)
def group_delete(request: HttpRequest, group_id: str) -> HttpResponse:
    _, err = attempt(request, group_ops.delete, group_id, success=f"Deleted group {group_id}.")
    if err:
        return group_detail(request, group_id, errors=err.errors, status=err.status)
    return redirect("groups")
