"""Consumer groups: lag per partition in records and in time, Burrow-style status (from
the monitor), and offset resets with a dry run first."""

from __future__ import annotations

import time

from cluster_client import admin, records, zk
from cluster_client.errors import NotFound, OpError
from console.changes import Actor, validation
from console.changes.messages import parse_when
from console.roles import ADMIN, OPERATOR
from livefeed import history

STRATEGIES = ("earliest", "latest", "timestamp", "offset", "shift")
ACTIVE_STATES = {"Stable", "PreparingRebalance", "CompletingRebalance"}


def detail(group_id: str) -> dict:
    group = admin.describe_group(group_id)
    committed = admin.group_offsets(group_id)
    if group["state"] == "Dead" and not committed:
        raise NotFound(f"Consumer group {group_id!r} does not exist.", "group")
    owner = {part: m for m in group["members"] for part in m["assignment"]}
    parts = sorted(set(committed) | set(owner))
    known = set(zk.topic_names())
    parts = [p for p in parts if p[0] in known]
    ends = admin.offsets(parts, "latest")
    lagging = {p: committed[p] for p in parts if p in committed and committed[p] < ends[p]}
    stamps = records.timestamps_at(lagging) if lagging else {}
    status = history.group_status(group_id) or {}
    per_part = status.get("partitions", {})
    now_ms = time.time() * 1000
    rows = []
    for t, p in parts:
        c = committed.get((t, p))
        end = ends[(t, p)]
        lag = None if c is None else max(0, end - c)
        ts = stamps.get((t, p))
        live = per_part.get(f"{t}/{p}", {})
        member = owner.get((t, p))
        rows.append(
            {
                "topic": t,
                "partition": p,
                "committed": c,
                "end": end,
                "lag": lag,
                "lag_ms": 0 if lag == 0 else (None if ts is None else max(0, now_ms - ts)),
                "member": member["client_id"] if member else None,
                "host": member["host"] if member else None,
                "status": live.get("status", "OK" if lag == 0 else None),
                "rate": live.get("rate"),
                "eta_s": live.get("eta_s"),
            }
        )
    group.update(
        partitions=rows,
        lag=sum(r["lag"] or 0 for r in rows),
        lag_ms=max((r["lag_ms"] or 0 for r in rows), default=0),
        status=status.get("status"),
        topics=sorted({r["topic"] for r in rows}),
    )
    return group


def summaries() -> list[dict]:
    """Every group with its state and, from the monitor, lag and status."""
    out = []
    for g in admin.list_groups():
        s = history.group_status(g["group_id"]) or {}
        g.update(
            lag=s.get("lag"),
            lag_ms=s.get("lag_ms"),
            status=s.get("status"),
            members=s.get("members"),
            topics=s.get("topics", []),
        )
        out.append(g)
    return out


def plan(group_id: str, topic: str, partitions, strategy: str, value=None) -> dict:
    """What a reset would do, computed from the committed offsets and the log bounds.
    Nothing is changed."""
    if strategy not in STRATEGIES:
        raise OpError(f"Strategy must be one of {', '.join(STRATEGIES)}.", "strategy")
    group = admin.describe_group(group_id)
    committed = admin.group_offsets(group_id)
    parts = _scope(topic, partitions, committed)
    start = admin.offsets(parts, "earliest")
    end = admin.offsets(parts, "latest")
    target = _targets(strategy, value, parts, committed, start, end)
    rows = []
    for part in parts:
        new = min(max(target[part], start[part]), end[part])
        rows.append(
            {
                "topic": part[0],
                "partition": part[1],
                "current": committed.get(part),
                "new": new,
                "start": start[part],
                "end": end[part],
                "lag_after": end[part] - new,
            }
        )
    return {
        "group_id": group_id,
        "state": group["state"],
        "strategy": strategy,
        "value": value,
        "partitions": rows,
        "active": group["state"] in ACTIVE_STATES or bool(group["members"]),
    }


def _scope(topic: str, partitions, committed: dict) -> list[tuple[str, int]]:
    topic = (topic or "").strip()
    if not topic:
        parts = sorted(committed)
        if not parts:
            raise OpError("The group has no committed offsets; name a topic to reset.", "topic")
        return parts
    topic = validation.topic_name(topic, "topic")
    try:
        count = len(zk.assignment(topic))
    except NotFound:
        raise OpError(f"Topic {topic!r} does not exist.", "topic") from None
    if partitions in (None, "", []):
        return [(topic, p) for p in range(count)]
    if isinstance(partitions, str):
        partitions = [x for x in partitions.replace(" ", "").split(",") if x]
    wanted = sorted(
        {validation.whole(p, "partitions", 0, count - 1, "Partition") for p in partitions}
    )
    return [(topic, p) for p in wanted]


def _targets(strategy, value, parts, committed, start, end) -> dict:
    if strategy == "earliest":
        return dict(start)
    if strategy == "latest":
        return dict(end)
    if strategy == "timestamp":
        return admin.offsets(parts, parse_when(str(value or "")))
    if strategy == "offset":
        offset = validation.whole(value, "value", 0, validation.LONG_MAX, "Offset")
        return {p: offset for p in parts}
    shift = validation.whole(value, "value", -validation.LONG_MAX, validation.LONG_MAX, "Shift")
    missing = [f"{t}-{p}" for t, p in parts if (t, p) not in committed]
    if missing:
        raise OpError(
            f"Shift needs a committed offset; {', '.join(missing[:5])} has none.", "value"
        )
    return {p: committed[p] + shift for p in parts}


def reset(
    actor: Actor,
    group_id: str,
    topic: str,
    partitions,
    strategy: str,
    value=None,
    dry_run: bool = True,
) -> dict:
    actor.require(OPERATOR)
    result = plan(group_id, topic, partitions, strategy, value)
    if result["active"]:
        raise OpError(
            f"Group {group_id!r} is {result['state']} with members; stop its consumers "
            f"before resetting offsets (as kafka-consumer-groups requires).",
            "group",
        )
    if dry_run:
        return {**result, "dry_run": True}
    new = {(r["topic"], r["partition"]): r["new"] for r in result["partitions"]}
    before = {f"{r['topic']}/{r['partition']}": r["current"] for r in result["partitions"]}
    after = {f"{t}/{p}": o for (t, p), o in new.items()}
    try:
        admin.alter_group_offsets(group_id, new)
    except OpError as exc:
        actor.failed("group.reset", f"group:{group_id}", exc, before, after)
        raise
    actor.done(
        "group.reset",
        f"group:{group_id}",
        before,
        {"strategy": strategy, "value": value, "offsets": after},
    )
    return {**result, "dry_run": False}


def delete(actor: Actor, group_id: str) -> None:
    actor.require(ADMIN)
    group = admin.describe_group(group_id)
    if group["members"]:
        raise OpError(f"Group {group_id!r} has members; stop them first.", "group")
    before = {f"{t}/{p}": o for (t, p), o in admin.group_offsets(group_id).items()}
    admin.delete_group(group_id)
    actor.done("group.delete", f"group:{group_id}", before, None)
