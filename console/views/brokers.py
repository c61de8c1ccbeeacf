"""A broker's page: what its own /metrics say, charted live (the monitor scrapes it
once a second, see console/monitor/brokers.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from cluster_client import state
from cluster_client.errors import OpError
from console.monitor.brokers import metrics_port
from console.roles import VIEWER, role_required
from console.views.common import page, unavailable
from livefeed import history
from livefeed.groups import broker_sub

CHARTS = (  # (series name, title)
    ("bytes_in", "Bytes in /s"),
    ("bytes_out", "Bytes out /s"),
    ("messages_in", "Messages in /s"),
    ("requests", "Requests /s"),
    ("under_replicated", "Under-replicated partitions (led here)"),
    ("purgatory", "Purgatory size (parked produce + fetch)"),
    ("loop_lag_ms", "Event-loop lag, ms"),
    ("cpu", "CPU, % of one core"),
)
CLUSTER_CHARTS = CHARTS[:5] + CHARTS[5:6]


def chart_context(owner: int | str, prefix: str, charts=CHARTS) -> tuple[list[dict], dict]:
    """The charts of a page and their last hour, as the template and console.js want."""
    rows = [{"series": f"{prefix}:{name}", "title": title, "name": name} for name, title in charts]
    data = {r["series"]: history.broker_series(owner, r["name"]) for r in rows}
    return rows, data  # the template writes it with json_script


@role_required(VIEWER)
def broker_detail(request: HttpRequest, broker_id: int) -> HttpResponse:
    subs = [broker_sub(broker_id)]
    context = {"broker_id": broker_id, "port": metrics_port(broker_id)}
    try:
        summary = state.overview()
    except OpError as exc:
        return unavailable(request, "console/broker.html", exc, context, subs)
    info = next((b for b in summary["brokers"] if b["id"] == broker_id), None)
    charts, series = chart_context(broker_id, f"b{broker_id}")
    latest = history.broker_metrics(broker_id)
    context.update(
        broker=info,
        controller=summary.get("controller") == broker_id,
        charts=charts,
        series=series,
        latest=latest,
        apis=sorted((latest.get("by_api") or {}).items()),
        monitor_age=history.monitor_age(),
    )
    return page(request, "console/broker.html", context, subs)
