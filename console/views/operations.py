"""Operations pages: the list, one operation (live progress bar, step log, cancel,
pause/resume), and the start form every start button posts to (a rebalance shows its
dry-run table first, then Execute posts the same fields again)."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from cluster_client import clusters
from cluster_client.errors import OpError
from console.roles import VIEWER, role_required
from console.views.common import attempt, back, page
from operations import service
from operations.models import Operation

INT_FIELDS = ("throttle", "max_moves_per_broker", "replication_factor", "broker", "gate_timeout_s")
LIST_INT_FIELDS = ("brokers",)
LIST_FIELDS = ("topics",)


@role_required(VIEWER)
def operation_list(request: HttpRequest) -> HttpResponse:
    ops = Operation.objects.filter(cluster=clusters.current_name())[:200]
    return page(request, "console/operations.html", {"operations": ops}, ["operations"])


@role_required(VIEWER)
def operation_detail(request: HttpRequest, op_id: int) -> HttpResponse:
    op = service.get(op_id)
    context = {
        "op": op,
        "params": json.dumps(op.params, indent=2)[:20000],
        "result": json.dumps(op.result, indent=2)[:50000] if op.result is not None else "",
        "election": election_rows(op.result) if op.kind == "elect-leaders" else None,
    }
    return page(request, "console/operation.html", context, [f"operation:{op.id}"])


def election_rows(result: dict | None) -> dict | None:
    """An election's result as a table: partition, old leader, new leader, outcome."""
    if not result:
        return None
    rows = [{**r, "outcome": "moved"} for r in result.get("elected", [])]
    rows += [
        {**r, "outcome": f"{r['error']}: {r['message']}".rstrip(": ")}
        for r in result.get("failed", [])
    ]
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    return {"rows": rows, "not_needed": result.get("not_needed", 0)}


def _fields(post) -> dict:
    """The start form's fields as the API takes them (empty ones left out)."""
    body: dict = {"kind": post.get("kind", "")}
    for key, value in post.items():
        if key in ("csrfmiddlewaretoken", "kind", "next", "execute") or value == "":
            continue
        try:
            if key in INT_FIELDS:
                body[key] = int(value)
            elif key in LIST_INT_FIELDS:
                body[key] = [int(v) for v in value.replace(",", " ").split()]
            elif key in LIST_FIELDS:
                body[key] = [v for v in value.replace(",", " ").split()]
            elif key == "plan":
                body[key] = json.loads(value)
            else:
                body[key] = value
        except ValueError:
            raise OpError(f"{key} is not valid: {value!r}.", key) from None
    return body


@require_POST
@role_required(VIEWER)
def operation_start(request: HttpRequest) -> HttpResponse:
    """A rebalance without `execute` answers the dry-run page; everything else starts."""
    try:
        body = _fields(request.POST)
    except OpError as exc:
        return _refused(request, exc)
    dry = body["kind"] == "rebalance" and not request.POST.get("execute")
    answer, error = attempt(request, lambda a: service.start(a, {**body, "dry_run": dry}))
    if error is not None:
        return back(request, reverse("operations"))
    status, data = answer
    if status == 200:
        hidden = {k: v for k, v in request.POST.items() if k not in ("csrfmiddlewaretoken",)}
        context = {"proposal": data["proposal"], "hidden": hidden, "kind": body["kind"]}
        return page(request, "console/proposal.html", context)
    return redirect("operation", op_id=data["id"])


def _refused(request: HttpRequest, exc: OpError) -> HttpResponse:
    from django.contrib import messages

    messages.error(request, exc.message)
    return back(request, reverse("operations"))


@require_POST
@role_required(VIEWER)
def operation_action(request: HttpRequest, op_id: int) -> HttpResponse:
    action = request.POST.get("action")
    if action == "cancel":
        attempt(request, service.cancel, op_id, success=f"Cancel asked of operation {op_id}.")
    elif action in ("pause", "resume"):
        attempt(request, service.pause, op_id, action == "pause", success=f"{action.title()}d.")
    return redirect("operation", op_id=op_id)
