"""The cluster as the console shows it: ZooKeeper's view (brokers, controller,
assignments, leader and ISR) joined with what the brokers report (log start, high
watermark, per-replica log-end offset and size). Views, the API and the monitor all
build their numbers here.

Per-replica LEO: each broker is asked for the LEO of its own replicas with ListOffsets
as Kafka's debugging replica id (-2), which Kafka answers from followers too. Where a
broker answers only as leader, a follower's LEO is the leader's minus the offset_lag its
broker reports in DescribeLogDirs.
"""

from __future__ import annotations

import json
import threading
import time

from broker.zk.znodes import ConfigEntityZNode
from cluster_client import clusters, picture, wire, zk

Part = tuple[str, int]


def together(*fns):
    """Call each function at once (ZooKeeper and broker reads wait on the network, not
    on each other); their results in order. The first runs here, the others on daemon
    threads (a read stuck on a cluster that went away never keeps the process from
    exiting, as a pool's workers would); the first error is raised."""
    results: list = [None] * len(fns)
    errors: list = [None] * len(fns)

    def run(i: int) -> None:
        try:
            results[i] = fns[i]()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread below
            errors[i] = exc

    threads = [  # each works on the caller's cluster
        threading.Thread(target=clusters.in_context(run), args=(i,), name="quill-page", daemon=True)
        for i in range(1, len(fns))
    ]
    for thread in threads:
        thread.start()
    run(0)
    if errors[0] is not None:
        raise errors[0]
    for i, thread in enumerate(threads, 1):
        thread.join()
        if errors[i] is not None:
            raise errors[i]
    return results


def addresses(brokers: list[dict]) -> dict[int, tuple[str, int]]:
    return {b["id"]: (b["host"], b["port"]) for b in brokers}


def sample(
    brokers: dict[int, tuple[str, int]],
    leaders: dict[Part, int],
    replicas: dict[Part, list[int]],
    scoped: bool = False,
    slow: set[Part] | None = None,
) -> dict:
    """Ask every live broker at once. Returns {"start", "hw": {part: offset},
    "leo", "size", "lag": {(broker, part): n}, "dirs": {broker: [...]},
    "errors": {broker: sentence}}. `scoped` limits DescribeLogDirs to `replicas`.
    `slow`, when given, limits what changes slowly (log start, replica sizes) to those
    partitions, so a caller sampling every second can spread them over rounds; high
    watermarks and log-end offsets are always asked for every partition."""
    led: dict[int, list[Part]] = {}
    hosted: dict[int, list[Part]] = {}
    for part, leader in leaders.items():
        led.setdefault(leader, []).append(part)
    for part, ids in replicas.items():
        for b in ids:
            hosted.setdefault(b, []).append(part)
    live = {b: addr for b, addr in brokers.items() if b in led or b in hosted}

    def ask(host: str, port: int, b: int) -> dict:
        mine, here = led.get(b, []), hosted.get(b, [])
        if slow is not None:
            mine_slow = [p for p in mine if p in slow]
            here_slow = [p for p in here if p in slow]
        else:
            mine_slow, here_slow = mine, (here if scoped else None)
        calls = []
        if mine:
            calls.append(("hw", wire.list_offsets_call({p: wire.LATEST for p in mine})))
        if here:
            leo = wire.list_offsets_call({p: wire.LATEST for p in here}, wire.DEBUGGING)
            calls.append(("leo", leo))
        if mine_slow:
            calls.append(("start", wire.list_offsets_call({p: wire.EARLIEST for p in mine_slow})))
        calls.append(("dirs", wire.describe_log_dirs_call(here_slow)))
        answers = wire.broker_socket(host, port).pipeline([c for _, c in calls])
        return {name: answer for (name, _), answer in zip(calls, answers, strict=True)}

    answers = wire.on_each({b: (h, p, (b,)) for b, (h, p) in live.items()}, ask)
    return _combine(answers, leaders, replicas)


def _combine(answers: dict, leaders: dict, replicas: dict) -> dict:
    result = {"start": {}, "hw": {}, "leo": {}, "size": {}, "lag": {}, "dirs": {}, "errors": {}}
    for b, answer in answers.items():
        if isinstance(answer, Exception):
            result["errors"][b] = f"broker {b} did not answer: {answer}"
            continue
        result["start"].update(_known(answer.get("start", {})))
        result["hw"].update(_known(answer.get("hw", {})))
        result["dirs"][b] = answer["dirs"]["dirs"]
        for part, info in answer["dirs"]["replicas"].items():
            result["size"][(b, part)] = info["size"]
            result["lag"][(b, part)] = info["offset_lag"]
        for part, leo in answer.get("leo", {}).items():
            if leo is not None:
                result["leo"][(b, part)] = leo
    # Followers whose broker answered only as leader: leader LEO - reported offset lag.
    for part, ids in replicas.items():
        leader = leaders.get(part)
        leader_leo = result["leo"].get((leader, part))
        for b in ids:
            if (b, part) not in result["leo"] and leader_leo is not None:
                if (b, part) in result["size"]:
                    result["leo"][(b, part)] = leader_leo - result["lag"].get((b, part), 0)
        for b in ids:
            leo = result["leo"].get((b, part))
            if leo is not None and leader_leo is not None:
                result["lag"][(b, part)] = max(0, leader_leo - leo)
    return result


def _known(offsets: dict) -> dict:
    return {k: v for k, v in offsets.items() if v is not None}


def partition_rows(topic: str, assignment: dict, states: dict, live: set, s: dict) -> list:
    """One row per partition with its replicas, for the topic page and API."""
    rows = []
    for p in sorted(assignment):
        part = (topic, p)
        state = states.get(part, {"leader": -1, "leader_epoch": -1, "isr": []})
        replicas = assignment[p]
        isr = state["isr"]
        start, hw = s["start"].get(part), s["hw"].get(part)
        rows.append(
            {
                "partition": p,
                "leader": state["leader"],
                "leader_epoch": state["leader_epoch"],
                "replicas": replicas,
                "isr": isr,
                "offline": state["leader"] not in live,
                "under_replicated": len(isr) < len(replicas),
                "start": start,
                "hw": hw,
                "records": None if start is None or hw is None else hw - start,
                "size": s["size"].get((state["leader"], part)),
                "replica_detail": [
                    {
                        "broker": b,
                        "alive": b in live,
                        "in_isr": b in isr,
                        "leader": b == state["leader"],
                        "leo": s["leo"].get((b, part)),
                        "lag": s["lag"].get((b, part)),
                        "size": s["size"].get((b, part)),
                    }
                    for b in replicas
                ],
            }
        )
    return rows


def topic_detail(topic: str) -> dict:
    snap = picture.snapshot()
    if snap is not None and topic in snap["assignments"]:
        assignment, states = snap["assignments"][topic], snap["states"]
        brokers = picture.brokers(snap)
    else:
        assignment = zk.assignment(topic)
        states = zk.partition_states([(topic, p) for p in assignment])
        brokers = zk.brokers()
    live = {b["id"] for b in brokers}
    leaders = {part: st["leader"] for part, st in states.items() if st["leader"] in live}
    replicas = {(topic, p): r for p, r in assignment.items()}
    s = sample(addresses(brokers), leaders, replicas, scoped=True)
    rows = partition_rows(topic, assignment, states, live, s)
    return {
        "name": topic,
        "partitions": rows,
        "replication_factor": max((len(r) for r in assignment.values()), default=0),
        "under_replicated": sum(r["under_replicated"] for r in rows),
        "offline": sum(r["offline"] for r in rows),
        "size": sum(r["size"] or 0 for r in rows),
        "records": sum(r["records"] or 0 for r in rows),
        "errors": list(s["errors"].values()),
    }


def overview() -> dict:
    """Brokers, controller and partition health counts for the cluster page."""
    snap = picture.snapshot()
    if snap is not None:  # a big cluster: the watched picture (cluster_client/picture.py)
        brokers = picture.brokers(snap)
        live = {b["id"] for b in brokers}
        states, min_isr = snap["states"], snap["min_isr"]
        return summarize(brokers, live, snap["controller"], snap["assignments"], states, min_isr)
    brokers = zk.brokers()
    live = {b["id"] for b in brokers}
    topics = zk.topic_names()
    assignments = zk.assignments(topics)
    parts = [(t, p) for t, a in assignments.items() for p in a]
    if picture.wanted(len(parts)):
        picture.start()
    states = zk.partition_states(parts)
    return summarize(brokers, live, zk.controller(), assignments, states, min_isrs(topics))


def min_isrs(topics: list[str]) -> dict[str, int]:
    """min.insync.replicas per topic: its override, else the brokers' dynamic default,
    else Kafka's default of 1."""
    default = int(zk.entity_config("brokers/<default>").get("min.insync.replicas", 1))
    paths = {t: ConfigEntityZNode.path("topics", t) for t in topics}
    data = zk.get_many(list(paths.values()))
    out = {}
    for t, path in paths.items():
        raw = data[path]
        config = json.loads(raw).get("config", {}) if raw else {}
        out[t] = int(config.get("min.insync.replicas", default))
    return out


def summarize(brokers, live, controller, assignments, states, min_isr=None) -> dict:
    min_isr = min_isr or {}
    leaders: dict[int, int] = {}
    hosted: dict[int, int] = {}
    topics = {}
    urp = offline = under_min = 0
    for t, a in assignments.items():
        t_urp = t_offline = 0
        for p, replicas in a.items():
            st = states.get((t, p), {"leader": -1, "isr": []})
            for b in replicas:
                hosted[b] = hosted.get(b, 0) + 1
            if st["leader"] in live:
                leaders[st["leader"]] = leaders.get(st["leader"], 0) + 1
            else:
                t_offline += 1
            if len(st["isr"]) < len(replicas):
                t_urp += 1
            if len(st["isr"]) < min_isr.get(t, 1):
                under_min += 1
        urp += t_urp
        offline += t_offline
        topics[t] = {
            "offline": t_offline,
            "partitions": len(a),
            "replication_factor": max((len(r) for r in a.values()), default=0),
            "under_replicated": t_urp,
        }
    known = {b["id"] for b in brokers} | set(hosted)
    rows = []
    by_id = {b["id"]: b for b in brokers}
    for b in sorted(known):
        info = by_id.get(b, {"host": "", "port": None, "rack": None})
        rows.append(
            {
                "id": b,
                "host": info["host"],
                "port": info["port"],
                "rack": info.get("rack"),
                "alive": b in live,
                "controller": b == controller,
                "leaders": leaders.get(b, 0),
                "replicas": hosted.get(b, 0),
            }
        )
    return {
        "brokers": rows,
        "alive": sum(r["alive"] for r in rows),
        "controller": controller,
        "topics": topics,
        "partitions": sum(t["partitions"] for t in topics.values()),
        "under_replicated": urp,
        "offline": offline,
        "under_min_isr": under_min,
    }


DIRS_TTL_S = 10.0
_dirs_lock = threading.Lock()
_dirs: dict = {"key": None, "at": 0.0, "answers": None}


def all_log_dirs(brokers: list[dict]) -> dict:
    """DescribeLogDirs of every replica on each of `brokers` ({id: answer or the
    exception}). In a big cluster (QUILL_WATCH_FROM_PARTITIONS replicas or more) an
    answer is kept DIRS_TTL_S for the cluster and topics pages to share: sizes move
    slowly, and the monitor updates the cells live every second anyway."""
    key = (clusters.current().name, *sorted((b["id"], b["host"], b["port"]) for b in brokers))
    with _dirs_lock:
        if _dirs["key"] == key and time.monotonic() - _dirs["at"] < DIRS_TTL_S:
            return _dirs["answers"]
    calls = {b["id"]: (b["host"], b["port"], ()) for b in brokers}
    answers = wire.on_each(calls, wire.describe_log_dirs)
    good = [a for a in answers.values() if not isinstance(a, Exception)]
    if len(good) == len(answers) and picture.wanted(sum(len(a["replicas"]) for a in good)):
        with _dirs_lock:
            _dirs.update(key=key, at=time.monotonic(), answers=answers)
    return answers


def topic_sizes(brokers: list[dict]) -> dict[str, int]:
    """Bytes per topic: the largest replica of each partition, summed."""
    biggest: dict[tuple[str, int], int] = {}
    for answer in all_log_dirs(brokers).values():
        if isinstance(answer, Exception):
            continue
        for part, info in answer["replicas"].items():
            biggest[part] = max(biggest.get(part, 0), info["size"])
    sizes: dict[str, int] = {}
    for (t, _p), n in biggest.items():
        sizes[t] = sizes.get(t, 0) + n
    return sizes


def log_dir_bytes(brokers: list[dict]) -> dict[int, int]:
    """Bytes of replicas on each live broker (DescribeLogDirs)."""
    answers = all_log_dirs([b for b in brokers if b.get("alive", True)])
    return {
        b: sum(r["size"] for r in a["replicas"].values())
        for b, a in answers.items()
        if not isinstance(a, Exception)
    }
