"""Broker configs: what a broker runs with (static server.properties, dynamic per
broker, dynamic cluster default, Kafka's defaults), and the edit of one level's dynamic
configs in two steps: preview (the diff, checked by the brokers) then apply."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from cluster_client import zk
from cluster_client.errors import OpError
from console.changes import broker_configs as ops
from console.changes import validation
from console.roles import VIEWER, role_required
from console.views.common import attempt, page, unavailable

TEMPLATE = "console/broker_configs.html"


def _context(broker: str) -> dict:
    rows = ops.describe(broker)
    rows.sort(key=lambda r: (not r["here"], r["read_only"], r["name"]))
    dynamic = ops.current(broker)
    return {
        "level": broker,
        "is_default": broker == ops.DEFAULT,
        "configs": rows,
        "text": "\n".join(f"{k}={v}" for k, v in sorted(dynamic.items())),
        "broker_ids": zk.broker_ids(),
    }


def _render(request, broker: str, extra=None, status=200) -> HttpResponse:
    try:
        context = _context(broker)
    except OpError as exc:
        return unavailable(request, TEMPLATE, exc, {"level": broker})
    context.update(extra or {})
    return page(request, TEMPLATE, context, status=status)


@role_required(VIEWER)
def broker_configs(request: HttpRequest, broker: str) -> HttpResponse:
    return _render(request, broker)


@require_POST
@role_required(VIEWER)
def broker_configs_change(request: HttpRequest, broker: str) -> HttpResponse:
    text = request.POST.get("configs", "")
    try:
        wanted = validation.parse_config_text(text)
    except OpError as exc:
        messages.error(request, exc.message)
        return _render(request, broker, {"text": text, "errors": exc.errors}, 400)
    if request.POST.get("step") != "apply":
        change, err = attempt(request, ops.preview, broker, wanted)
        extra = {"text": text, "errors": err.errors if err else {}, "change": change}
        return _render(request, broker, extra, err.status if err else 200)
    what = "the cluster default" if broker == ops.DEFAULT else f"broker {broker}"
    _, err = attempt(request, ops.apply, broker, wanted, success=f"Saved {what}'s configs.")
    if err:
        return _render(request, broker, {"text": text, "errors": err.errors}, err.status)
    return redirect("broker-configs", broker=broker)
