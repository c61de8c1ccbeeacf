"""Topics: list (search, partitions, RF, URP, size, rates) and detail (partitions with
per-replica LEO and lag, configs, ISR history, which brokers its consumers read from),
create, delete, add partitions, edit configs."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from broker.protocol.internal_topics import refusal
from cluster_client import admin, state, zk
from cluster_client.errors import NotFound, OpError
from console.changes import topics as topic_ops
from console.changes import validation
from console.roles import VIEWER, role_required
from console.views.common import attempt, page, unavailable
from console.views.partitions import min_isr_of, partition_page
from livefeed import groups as live_groups
from livefeed import history
from operations.cleaner import compaction_reports

ISR_KINDS = ("isr_shrink", "isr_expand", "leader_change", "partition_offline")


@role_required(VIEWER)
def topic_list(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    try:
        summary, sizes = state.together(state.overview, lambda: state.topic_sizes(zk.brokers()))
    except OpError as exc:
        return unavailable(request, "console/topics.html", exc, subs=["topics"])
    rates = history.topic_rates()
    rows = [
        {
            "name": t,
            **info,
            "size": sizes.get(t),
            "rate_in": rates.get(t, {}).get("in"),
            "rate_out": rates.get(t, {}).get("out"),
            "internal": t.startswith("__"),
        }
        for t, info in sorted(summary["topics"].items())
    ]
    context = {
        "topics": rows,
        "errors": errors or {},
        "form": request.POST if request.method == "POST" else {},
        "live_brokers": sum(b["alive"] for b in summary["brokers"]),
        "config_keys": sorted(validation.TOPIC_CONFIGS),
    }
    return page(request, "console/topics.html", context, ["topics"], status=status)


@require_POST
@role_required(VIEWER)
def topic_create(request: HttpRequest) -> HttpResponse:
    try:
        configs = validation.parse_config_text(request.POST.get("configs", ""))
    except OpError as exc:
        messages.error(request, exc.message)
        return topic_list(request, exc.errors, 400)
    result, err = attempt(
        request,
        topic_ops.create,
        request.POST.get("name", ""),
        request.POST.get("partitions", ""),
        request.POST.get("replication_factor", ""),
        configs,
    )
    if err:
        return topic_list(request, err.errors, err.status)
    messages.success(request, f"Created topic {result['name']}.")
    return redirect("topic", name=result["name"])


@role_required(VIEWER)
def topic_detail(request: HttpRequest, name: str, errors=None, status=200) -> HttpResponse:
    subs = [live_groups.topic_sub(name)]
    try:
        detail = state.topic_detail(name)
        configs = admin.topic_configs(name)
    except NotFound:
        messages.error(request, f"Topic {name!r} does not exist (any more).")
        return redirect("topics")
    except OpError as exc:
        return unavailable(request, "console/topic.html", exc, {"name": name}, subs)
    readings = history.all_broker_metrics()
    min_isr = min_isr_of(configs)
    context = {
        "topic": detail,
        "page_of": partition_page(detail["partitions"], request.GET, min_isr),
        "min_isr": min_isr,
        "configs": configs,
        "override_count": sum(c["source"] == "topic" for c in configs),
        # A refused edit keeps what the operator typed, the error beside it.
        "overrides": request.POST["configs"]
        if "configs" in request.POST
        else "\n".join(f"{c['name']}={c['value']}" for c in configs if c["source"] == "topic"),
        "history": history.events(50, topic=name, kinds=ISR_KINDS),
        "rate_in": history.topic_rates().get(name, {}).get("in"),
        "errors": errors or {},
        "config_keys": sorted(validation.TOPIC_CONFIGS),
        "max_rf": max((len(p["replicas"]) for p in detail["partitions"]), default=0),
        "protected": refusal(name, "add partitions to or delete"),
        "cleaner": replica_cleaner_metrics(name, readings),
        "reads": consumer_reads(name, detail["partitions"], readings),
        "compacted": any(
            c["name"] == "cleanup.policy" and "compact" in c["value"] for c in configs
        ),
        "compaction": compaction_reports(name, configs),
    }
    return page(request, "console/topic.html", context, subs, status=status)


def replica_cleaner_metrics(topic: str, readings: dict[int, dict]) -> list[dict]:
    """The log cleaner's view of each replica of a compacted topic, from the brokers'
    /metrics (quill_log_cleaner_*) as the monitor last read them."""
    rows = []
    for broker_id, reading in sorted(readings.items()):
        for key, st in (reading.get("cleaner") or {}).items():
            name, _, partition = key.rpartition("/")
            if name == topic:
                rows.append({"partition": int(partition), "broker": broker_id, **st})
    return sorted(rows, key=lambda r: (r["partition"], r["broker"]))


def consumer_reads(topic: str, partitions: list[dict], readings: dict[int, dict]) -> list[dict]:
    """Each broker that sent this topic's records to consumers: its BytesOut for the
    topic (Kafka's per-topic BytesOutPerSec, consumer fetches only) as the monitor last
    read it, and which partitions it leads and follows. With fetch from follower
    (KIP-392) a follower's row says consumers read there. Per broker, not per partition
    or group: that is what the brokers measure."""
    rows = []
    for broker_id, reading in sorted(readings.items()):
        out = (reading.get("topic_out") or {}).get(topic)
        if not out or not out["total"]:
            continue
        leads = [p["partition"] for p in partitions if p["leader"] == broker_id]
        follows = [
            p["partition"]
            for p in partitions
            if broker_id in p["replicas"] and p["leader"] != broker_id
        ]
        rows.append({"broker": broker_id, **out, "leads": leads, "follows": follows})
    return rows


@require_POST
@role_required(VIEWER)
def topic_configs(request: HttpRequest, name: str) -> HttpResponse:
    try:
        wanted = validation.parse_config_text(request.POST.get("configs", ""))
    except OpError as exc:
        messages.error(request, exc.message)
        return topic_detail(request, name, exc.errors, 400)
    current = zk.entity_config(f"topics/{name}")
    set_ = {k: v for k, v in wanted.items() if current.get(k) != v}
    delete = [k for k in current if k not in wanted]
    _, err = attempt(
        request,
        topic_ops.alter_configs,
        name,
        set_,
        delete,
        success=f"Saved the configs of {name}.",
    )
    if err:
        return topic_detail(request, name, err.errors, err.status)
    return redirect(reverse("topic", args=[name]) + "#configs")


@require_POST
@role_required(VIEWER)
def topic_partitions(request: HttpRequest, name: str) -> HttpResponse:
    total = request.POST.get("partitions", "")
    _, err = attempt(
        request,
        topic_ops.add_partitions,
        name,
        total,
        success=f"{name} now has {total} partitions.",
    )
    if err:
        return topic_detail(request, name, err.errors, err.status)
    return redirect("topic", name=name)


@require_POST
@role_required(VIEWER)
def topic_delete(request: HttpRequest, name: str) -> HttpResponse:
    if request.POST.get("confirm", "") != name:
        messages.error(request, f"Type the topic's name ({name}) to confirm deleting it.")
        return topic_detail(request, name, {"confirm": "Type the topic's name."}, 400)
    _, err = attempt(request, topic_ops.delete, name, success=f"Deleted topic {name}.")
    if err:
        return topic_detail(request, name, err.errors, err.status)
    return redirect("topics")
