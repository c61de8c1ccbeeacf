"""Turning what the monitor sees into cluster events and live deltas.

Pure functions: a ZooKeeper change (from the watcher) or two consecutive samples in,
events and {subscription: delta} out. Keys are the data-k attributes the templates
put on cells (see templates/console/*.html)."""

from __future__ import annotations

from django.utils.html import escape

from cluster_client import redact
from console import fmt
from livefeed.groups import topic_sub

Deltas = dict[str, dict]  # subscription -> {"set": {...}, "events": [...], "refresh": bool}


def add(
    deltas: Deltas,
    sub: str,
    key: str | None = None,
    cell: dict | None = None,
    *,
    event: dict | None = None,
    refresh: bool = False,
    series=None,
) -> None:
    d = deltas.setdefault(sub, {})
    if key is not None:
        d.setdefault("set", {})[key] = cell
    if event is not None:
        d.setdefault("events", []).append(event)
    if refresh:
        d["refresh"] = True
    if series is not None:
        for name, points in series.items():
            d.setdefault("series", {}).setdefault(name, []).extend(points)


def event(change: dict, kind: str, level: str, text: str, **more) -> dict:
    return {"ts": change["ts"], "kind": kind, "level": level, "text": text, **more}


def replica_spans(replicas: list[int], isr: list[int], leader: int) -> list[list[str]]:
    """The replica badges of a partition: [[broker id, class], ...]."""
    spans = []
    for b in replicas:
        cls = "rep in" if b in isr else "rep out"
        if b == leader:
            cls += " lead"
        spans.append([str(b), cls])
    return spans


# A partition's problems, worst first: the topic page sorts by the first one a partition
# has (console.views.partitions) and live updates show the same labels.
PROBLEMS = (
    ("offline", "offline", "err"),
    ("under_min_isr", "under min ISR", "err"),
    ("under_replicated", "under-replicated", "warn"),
    ("not_preferred", "not on preferred leader", "warn"),
)


def state_spans(
    leader: int, live: set, isr: list, replicas: list, min_isr: int = 1
) -> list[list[str]]:
    """The state badges of a partition, as the topic page first renders them."""
    offline = leader not in live
    has = {
        "offline": offline,
        "under_min_isr": not offline and len(isr) < min_isr,
        "under_replicated": len(isr) < len(replicas),
        "not_preferred": not offline and bool(replicas) and leader != replicas[0],
    }
    spans = [[label, f"pill {cls}"] for key, label, cls in PROBLEMS if has[key]]
    return spans or [["ok", "pill ok"]]


def spans_html(spans: list[list[str]]) -> str:
    """The same badges for the page's first render (console.js builds them from a delta)."""
    return "".join(f'<span class="{escape(c)}">{escape(t)}</span>' for t, c in spans)


def replicas_html(replicas: list[int], isr: list[int], leader: int) -> str:
    return spans_html(replica_spans(replicas, isr, leader))


def partition_change(change: dict, live: set, min_isr: int = 1) -> tuple[list[dict], Deltas]:
    """Leader and ISR changes of one partition: events and the topic page's cells.
    ``min_isr``: the topic's min.insync.replicas, for the "under min ISR" badge."""
    t, p = change["topic"], change["partition"]
    old, new, replicas = change["old"], change["new"], change["replicas"]
    events: list[dict] = []
    where = f"{t}-{p}"
    if old is not None and not change.get("initial"):
        if old["leader"] != new["leader"]:
            if new["leader"] < 0 or new["leader"] not in live:
                events.append(
                    event(
                        change,
                        "partition_offline",
                        "err",
                        f"{where} has no leader (was broker {old['leader']})",
                        topic=t,
                        partition=p,
                    )
                )
            else:
                events.append(
                    event(
                        change,
                        "leader_change",
                        "warn",
                        f"{where} leader {old['leader']} → {new['leader']} "
                        f"(epoch {new['leader_epoch']})",
                        topic=t,
                        partition=p,
                    )
                )
        shrunk = sorted(set(old["isr"]) - set(new["isr"]))
        grown = sorted(set(new["isr"]) - set(old["isr"]))
        if shrunk:
            events.append(
                event(
                    change,
                    "isr_shrink",
                    "err",
                    f"{where} ISR shrank {fmt.ids(old['isr'])} → {fmt.ids(new['isr'])} "
                    f"(out: {fmt.ids(shrunk)})",
                    topic=t,
                    partition=p,
                )
            )
        if grown:
            events.append(
                event(
                    change,
                    "isr_expand",
                    "ok",
                    f"{where} ISR expanded {fmt.ids(old['isr'])} → "
                    f"{fmt.ids(new['isr'])} (back: {fmt.ids(grown)})",
                    topic=t,
                    partition=p,
                )
            )
    deltas: Deltas = {}
    sub = topic_sub(t)
    base = f"p:{t}:{p}"
    leader = new["leader"]
    add(deltas, sub, f"{base}:leader", fmt.cell(str(leader) if leader >= 0 else "none", leader))
    add(deltas, sub, f"{base}:epoch", fmt.cell(str(new["leader_epoch"]), new["leader_epoch"]))
    add(deltas, sub, f"{base}:isr", fmt.cell(fmt.ids(new["isr"])))
    add(deltas, sub, f"{base}:replicas", {"s": replica_spans(replicas, new["isr"], leader)})
    add(
        deltas,
        sub,
        f"{base}:state",
        {"s": state_spans(leader, live, new["isr"], replicas, min_isr)},
    )
    for e in events:
        add(deltas, sub, event=e)
        add(deltas, "cluster", event=e)
    return events, deltas


def broker_change(change: dict) -> tuple[list[dict], Deltas]:
    deltas: Deltas = {}
    b = change["broker"]
    if change["kind"] == "broker_up":
        where = f"{change.get('host')}:{change.get('port')}"
        e = event(change, "broker_up", "ok", f"broker {b} joined ({where})", broker=b)
        add(deltas, "cluster", f"b:{b}:alive", {"t": "up", "c": "pill ok"})
    else:
        e = event(
            change, "broker_down", "err", f"broker {b} left (its ZooKeeper session ended)", broker=b
        )
        add(deltas, "cluster", f"b:{b}:alive", {"t": "down", "c": "pill err"})
    if change.get("initial"):
        return [], deltas
    add(deltas, "cluster", event=e, refresh=True)
    return [e], deltas


def controller_change(change: dict) -> tuple[list[dict], Deltas]:
    deltas: Deltas = {}
    old, new = change["old"], change["new"]
    add(deltas, "cluster", "c:controller", fmt.cell(str(new) if new is not None else "none"))
    if old is not None:
        add(deltas, "cluster", f"b:{old}:ctl", {"s": []})
    if new is not None:
        add(deltas, "cluster", f"b:{new}:ctl", {"s": [["controller", "pill muted"]]})
    if change.get("initial"):
        return [], deltas
    text = (
        f"controller moved {old if old is not None else 'none'} → "
        f"{new if new is not None else 'none (election under way)'}"
    )
    e = event(change, "controller_change", "warn", text, broker=new)
    add(deltas, "cluster", event=e)
    return [e], deltas


def topic_change(change: dict) -> tuple[list[dict], Deltas]:
    deltas: Deltas = {}
    kind, t = change["kind"], change["topic"]
    if change.get("initial"):
        return [], deltas
    if kind == "topic_created":
        e = event(
            change, kind, "ok", f"topic {t} created with {change['partitions']} partitions", topic=t
        )
    elif kind == "topic_deleted":
        e = event(change, kind, "warn", f"topic {t} deleted", topic=t)
    else:
        e = event(
            change, kind, "ok", f"{t}: partitions {change['before']} → {change['after']}", topic=t
        )
    add(deltas, "cluster", event=e)
    add(deltas, "topics", refresh=True)
    add(deltas, topic_sub(t), event=e, refresh=True)
    return [e], deltas


def config_change(change: dict) -> tuple[list[dict], Deltas]:
    deltas: Deltas = {}
    entity = change["entity"]
    config = redact.config(change["config"]) or {}
    shown = ", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "defaults"
    e = event(change, "config_change", "muted", f"config of {entity}: {shown}")
    if entity.startswith("topics/"):
        t = entity.split("/", 1)[1]
        e["topic"] = t
        add(deltas, topic_sub(t), refresh=True)
    add(deltas, "cluster", event=e)
    return [e], deltas


HANDLERS = {
    "broker_up": broker_change,
    "broker_down": broker_change,
    "controller_change": controller_change,
    "topic_created": topic_change,
    "topic_deleted": topic_change,
    "partitions_added": topic_change,
    "config_change": config_change,
}


def for_change(
    change: dict, live: set, min_isr: dict[str, int] | None = None
) -> tuple[list[dict], Deltas]:
    """``min_isr``: min.insync.replicas per topic (the watcher's); 1 where unknown."""
    if change["kind"] == "partition_state":
        return partition_change(change, live, (min_isr or {}).get(change["topic"], 1))
    return HANDLERS[change["kind"]](change)


def summary_cells(summary: dict, min_isr_count: int | None = None) -> Deltas:
    """Cluster-wide counts for the cluster page and per-topic URP for the topic lists."""
    deltas: Deltas = {}
    c = "cluster"
    add(deltas, c, "c:urp", fmt.cell(fmt.num(summary["under_replicated"])))
    add(deltas, c, "c:offline", fmt.cell(fmt.num(summary["offline"])))
    add(deltas, c, "c:minisr", fmt.cell(fmt.num(summary["under_min_isr"])))
    add(deltas, c, "c:topics", fmt.cell(fmt.num(len(summary["topics"]))))
    add(deltas, c, "c:partitions", fmt.cell(fmt.num(summary["partitions"])))
    add(deltas, c, "c:brokers", fmt.cell(str(sum(b["alive"] for b in summary["brokers"]))))
    for b in summary["brokers"]:
        add(deltas, c, f"b:{b['id']}:leaders", fmt.cell(fmt.num(b["leaders"]), b["leaders"]))
        add(deltas, c, f"b:{b['id']}:replicas", fmt.cell(fmt.num(b["replicas"]), b["replicas"]))
    for t, info in summary["topics"].items():
        cell = fmt.cell(
            fmt.num(info["under_replicated"]),
            info["under_replicated"],
            "n txt-err" if info["under_replicated"] else "n",
        )
        add(deltas, "topics", f"t:{t}:urp", cell)
        add(deltas, topic_sub(t), f"t:{t}:urp", fmt.cell(str(info["under_replicated"])))
        add(deltas, topic_sub(t), f"t:{t}:offline", fmt.cell(str(info.get("offline", 0))))
    return deltas
