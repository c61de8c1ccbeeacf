"""Each kind's input check and dry run: (params the worker runs with, preview).

Reads the cluster (ZooKeeper, DescribeLogDirs); never changes it. Every refusal is an
OpError naming the field.
"""

from __future__ import annotations

from cluster_client.errors import OpError
from operations import cluster
from operations.kinds.reassign import parse_plan
from operations.planner import PlanError, describe, propose

GOALS = ("balance", "add-broker", "remove-broker", "replication-factor")


def _int(body: dict, key: str, low: int, default=None):
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OpError(f"{key} must be a whole number >= {low}.", key)
    return value


def _common(body: dict) -> dict:
    return {
        "throttle": _int(body, "throttle", 1),
        "max_moves_per_broker": _int(body, "max_moves_per_broker", 1, 5),
    }


def _racks(brokers: dict[int, dict]) -> dict[int, str | None]:
    return {b: info.get("rack") for b, info in brokers.items()}


def _preview(current, target, sizes, brokers) -> dict:
    proposal = describe(current, target, sizes, brokers)
    return {"proposal": proposal.as_dict()}


def reassign(body: dict) -> tuple[dict, dict]:
    try:
        target = parse_plan(body.get("plan"))
    except ValueError as exc:
        raise OpError(str(exc), "plan") from None
    brokers = cluster.brokers()
    topics = sorted({t for t, _ in target})
    current = cluster.assignment(topics)
    missing_topics = [t for t in topics if not any(k[0] == t for k in current)]
    if missing_topics:
        raise OpError(f"Unknown topic(s) {missing_topics}.", "plan")
    for (t, p), replicas in sorted(target.items()):
        if (t, p) not in current:
            raise OpError(f"{t}-{p} does not exist.", "plan")
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise OpError(f"{t}-{p}: unknown or offline broker(s) {unknown}.", "plan")
    racks = {b: r for b, r in _racks(brokers).items() if r}
    if racks:
        n_racks = len(set(racks.values()))
        for (t, p), replicas in sorted(target.items()):
            used = {racks.get(b) for b in replicas}
            if len(used) < min(len(replicas), n_racks):
                raise OpError(
                    f"{t}-{p}: replicas {replicas} share racks ({sorted(map(str, used))}) "
                    f"although {n_racks} racks exist: that breaks rack awareness.",
                    "plan",
                )
    sizes = cluster.partition_sizes(brokers)
    params = {"plan": body["plan"], **_common(body)}
    return params, _preview({p: current[p] for p in target}, target, sizes, brokers)


def rebalance(body: dict) -> tuple[dict, dict]:
    goal = body.get("goal", "balance")
    if goal not in GOALS:
        raise OpError(f"goal must be one of {', '.join(GOALS)}.", "goal")
    brokers = cluster.brokers()
    wanted_brokers = body.get("brokers") or []
    if not isinstance(wanted_brokers, list) or not all(isinstance(b, int) for b in wanted_brokers):
        raise OpError("brokers must be a list of broker ids.", "brokers")
    unknown = sorted(set(wanted_brokers) - set(brokers))
    if unknown:
        raise OpError(f"Unknown or offline broker(s) {unknown}.", "brokers")
    if goal in ("add-broker", "remove-broker") and not wanted_brokers:
        raise OpError(f"{goal} needs the brokers to add or remove.", "brokers")
    topics = body.get("topics")
    all_topics = cluster.assignment()
    names = sorted({t for t, _ in all_topics})
    if topics is not None:
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            raise OpError("topics must be a list of topic names.", "topics")
        unknown_topics = sorted(set(topics) - set(names))
        if unknown_topics:
            raise OpError(f"Unknown topic(s) {unknown_topics}.", "topics")
    scope = set(topics if topics is not None else names)
    current = {p: r for p, r in all_topics.items() if p[0] in scope}
    if not current:
        raise OpError("There is no partition to balance.", "topics")
    rfs = None
    if goal == "replication-factor":
        rf = _int(body, "replication_factor", 1)
        if rf is None:
            raise OpError("replication-factor needs replication_factor.", "replication_factor")
        rfs = dict.fromkeys(sorted(scope), rf)
    sizes = cluster.partition_sizes(brokers)
    try:
        target = propose(
            current,
            _racks(brokers),
            sizes,
            remove=wanted_brokers if goal == "remove-broker" else (),
            replication_factors=rfs,
        )
    except PlanError as exc:
        raise OpError(exc.message, exc.field) from None
    preview = _preview(current, target, sizes, brokers)
    moves = preview["proposal"]["moves"]
    if not moves:
        raise OpError("The cluster already meets every goal: nothing to move.", "goal")
    params = {"goal": goal, "plan": preview["proposal"]["plan"], **_common(body)}
    if wanted_brokers:
        params["brokers"] = wanted_brokers
    return params, preview


def elect_leaders(body: dict) -> tuple[dict, dict]:
    election = body.get("election_type", "preferred")
    if election not in ("preferred", "unclean"):
        raise OpError("election_type must be preferred or unclean.", "election_type")
    partitions = body.get("partitions")
    topics = body.get("topics")
    chosen = None
    if partitions is not None or topics is not None:
        every = cluster.assignment()
        chosen = set()
        for name in topics or []:
            found = [p for p in every if p[0] == name]
            if not found:
                raise OpError(f"Unknown topic {name!r}.", "topics")
            chosen.update(found)
        for entry in partitions or []:
            try:
                part = (str(entry["topic"]), int(entry["partition"]))
            except (KeyError, TypeError, ValueError):
                raise OpError(
                    'partitions are {"topic", "partition"} objects.', "partitions"
                ) from None
            if part not in every:
                raise OpError(f"{part[0]}-{part[1]} does not exist.", "partitions")
            chosen.add(part)
    params = {
        "election_type": election,
        "partitions": None if chosen is None else [list(p) for p in sorted(chosen)],
    }
    return params, {"partitions": params["partitions"], "election_type": election}


def compact(body: dict) -> tuple[dict, dict]:
    """Compaction now: a topic with cleanup.policy compact, every or chosen partitions."""
    from cluster_client import admin

    topic = body.get("topic")
    if not isinstance(topic, str) or not topic:
        raise OpError("compact needs the topic.", "topic")
    placed = sorted(p for t, p in cluster.assignment([topic]) if t == topic)
    if not placed:
        raise OpError(f"Topic {topic!r} does not exist.", "topic")
    policy = next(
        (c["value"] for c in admin.topic_configs(topic) if c["name"] == "cleanup.policy"), ""
    )
    if "compact" not in (policy or ""):
        raise OpError(
            f"{topic!r} has cleanup.policy={policy}: only compacted topics can be compacted.",
            "topic",
        )
    partitions = body.get("partitions")
    if partitions is not None:
        if not isinstance(partitions, list) or not all(isinstance(p, int) for p in partitions):
            raise OpError("partitions must be a list of partition numbers.", "partitions")
        missing = sorted(set(partitions) - set(placed))
        if missing:
            raise OpError(f"{topic!r} has no partition(s) {missing}.", "partitions")
        partitions = sorted(set(partitions))
    clean = body.get("clean", True)
    if isinstance(clean, str):
        clean = clean.lower() not in ("0", "false", "no")
    params = {"topic": topic, "partitions": partitions, "clean": bool(clean)}
    return params, dict(params)


def rolling_restart(body: dict) -> tuple[dict, dict]:
    """Every (or the chosen) live broker, controller last; refused while partitions are
    under-replicated or when no restart driver works here."""
    from operations.kinds.restart import gate
    from operations.restart import RestartError, get_driver

    brokers = cluster.brokers()
    wanted = body.get("brokers")
    if wanted is not None:
        if not isinstance(wanted, list) or not all(isinstance(b, int) for b in wanted):
            raise OpError("brokers must be a list of broker ids.", "brokers")
        unknown = sorted(set(wanted) - set(brokers))
        if unknown:
            raise OpError(f"Unknown or offline broker(s) {unknown}.", "brokers")
    try:
        why = get_driver().available()
    except RestartError as exc:
        why = str(exc)
    if why:
        raise OpError(why, "kind", status=409)
    under = gate(-1)
    if under:
        raise OpError(f"Not now: {under}. A rolling restart needs a healthy cluster.", status=409)
    params = {"brokers": wanted, "gate_timeout_s": _int(body, "gate_timeout_s", 1, 300)}
    return params, {"brokers": wanted or sorted(brokers)}


def decommission(body: dict) -> tuple[dict, dict]:
    """Drain one broker (remove-broker proposal over every topic), then stop it."""
    broker = _int(body, "broker", 0)
    if broker is None:
        raise OpError("decommission needs the broker.", "broker")
    params, preview = rebalance({**body, "goal": "remove-broker", "brokers": [broker]})
    params["broker"] = broker
    return params, preview
