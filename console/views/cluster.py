"""The cluster page (brokers, ZooKeeper, partition health, live event feed), /healthz."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache

from cluster_client import clusters, state, zk
from cluster_client.errors import OpError
from console.roles import VIEWER, role_required
from console.views.brokers import CLUSTER_CHARTS, chart_context
from console.views.common import page, unavailable
from livefeed import history


@role_required(VIEWER)
def home(request: HttpRequest) -> HttpResponse:
    try:
        summary, stats, dirs = state.together(
            state.overview, zk.server_stats, lambda: state.log_dir_bytes(zk.brokers())
        )
    except OpError as exc:
        return unavailable(request, "console/cluster.html", exc, subs=["cluster"])
    for b in summary["brokers"]:
        b["bytes"] = dirs.get(b["id"])
    context = {
        "bootstrap": clusters.current().bootstrap,
        "summary": summary,
        "zk": stats,
        "events": history.events(100),
        "monitor_age": history.monitor_age(),
    }
    context["charts"], context["series"] = chart_context("all", "cluster", CLUSTER_CHARTS)
    return page(request, "console/cluster.html", context, ["cluster"])


@role_required(VIEWER)
def events(request: HttpRequest) -> HttpResponse:
    topic = request.GET.get("topic", "")
    kind = request.GET.get("kind", "")
    rows = history.events(500, topic=topic, kinds=(kind,) if kind else ())
    context = {"events": rows, "topic": topic, "kind": kind, "kinds": history.EVENT_KINDS}
    return page(request, "console/events.html", context, ["cluster"])


@login_not_required
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """For health checks: no login; 200 when the console can reach its database."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any database error means unhealthy
        return JsonResponse({"status": "error", "detail": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})
