"""Alert rules (issue 29): the rules with their last event, a form to create or change
one, "test fire" (the evaluator's notifiers, kept as a test in the history) and delete
with a confirm step. Viewers read; operators change; alerts.service validates and
audits, exactly as for the API."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from alerts import service
from alerts.models import STATUSES, AlertRule, webhook_target
from cluster_client import clusters
from cluster_client.errors import NotFound
from console.roles import OPERATOR, VIEWER, role_required
from console.views.common import attempt, page

FIELDS = ("name", "group", "max_lag_ms", "webhook_url", "emails")


def _form_of(rule: AlertRule) -> dict:
    return {
        "id": rule.id,
        "name": rule.name,
        "group": rule.group,
        "statuses": rule.statuses,
        "max_lag_ms": "" if rule.max_lag_ms is None else rule.max_lag_ms,
        "webhook_url": rule.webhook_url,
        "emails": ", ".join(rule.emails),
        "enabled": rule.enabled,
    }


def _form_posted(request: HttpRequest) -> dict:
    p = request.POST
    return {
        **{k: p.get(k, "") for k in FIELDS},
        "id": p.get("id", ""),
        "statuses": p.getlist("statuses"),
        "enabled": p.get("enabled") == "on",
    }


@role_required(VIEWER)
def alert_list(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    rules = list(AlertRule.objects.filter(cluster=clusters.current_name()))
    last = service.last_events(rules)
    rows = [
        {"rule": r, "target": webhook_target(r.webhook_url), "last": last.get(r.id)} for r in rules
    ]
    if request.method == "POST":
        form = _form_posted(request)
    elif request.GET.get("edit", "").isdigit():
        try:
            form = _form_of(service.get(int(request.GET["edit"])))
        except NotFound:
            form = {"enabled": True}
    else:
        form = {"enabled": True}
    context = {"rows": rows, "statuses": STATUSES, "form": form, "errors": errors or {}}
    return page(request, "console/alerts.html", context, status=status)


@require_POST
@role_required(OPERATOR)
def alert_save(request: HttpRequest) -> HttpResponse:
    body = _form_posted(request)
    rule_id = body.pop("id")
    if rule_id.isdigit():
        _, err = attempt(request, service.update, int(rule_id), body, success="Saved the rule.")
    else:
        _, err = attempt(request, service.create, body, success="Created the rule.")
    if err:
        return alert_list(request, err.errors, err.status)
    return redirect("alerts")


@require_POST
@role_required(OPERATOR)
def alert_test(request: HttpRequest, rule_id: int) -> HttpResponse:
    event, _ = attempt(request, service.test_fire, rule_id)
    if event is not None:
        said = ", ".join(f"{k} {v}" for k, v in event.summary.items())
        ok = all(v == "delivered" for v in event.summary.values())
        (messages.success if ok else messages.error)(request, f"Test sent: {said}.")
    return redirect("alerts")


@require_POST
@role_required(OPERATOR)
def alert_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    attempt(request, service.delete, rule_id, success="Deleted the rule.")
    return redirect("alerts")
