"""Compaction now: writes `/admin/compact/<topic>` (id = the operation's) and waits for
every broker hosting a requested partition to write its results under
`results/<broker>` (docs/internal-interfaces.md). The result lists, per partition and
replica, dirty ratio and bytes before/after, records removed, tombstones kept and the
pass's duration. Idempotent: the request id is the operation's, so a resumed run finds
the request already written and only waits."""

from __future__ import annotations

import json

from kazoo.exceptions import NoNodeError

from broker.zk.znodes import CompactRequest, CompactRequestZNode, CompactResultZNode
from cluster_client import zk
from operations import cluster
from operations.jobs import Job, JobFailed, runner

WAIT_S = 600


def latest_results(topic: str) -> dict[int, dict]:
    """Each broker's last result for `topic` (a compaction or a standing-status request)."""
    client = zk.client()
    out = {}
    try:
        brokers = client.get_children(CompactResultZNode.results_path(topic))
    except NoNodeError:
        return out
    for b in brokers:
        try:
            out[int(b)] = json.loads(client.get(CompactResultZNode.path(topic, int(b)))[0])
        except (NoNodeError, ValueError):
            continue
    return out


def _results(topic: str, request_id: str) -> dict[int, dict]:
    return {b: body for b, body in latest_results(topic).items() if body.get("id") == request_id}


def standing(topic: str) -> list[dict]:
    """The cleaner's figures per replica as last reported (topic page): dirty ratio,
    bytes, last clean, uncleanable, error."""
    rows = []
    for b, body in sorted(latest_results(topic).items()):
        for part in body.get("partitions", []):
            rows.append(
                {
                    "broker": b,
                    "partition": part.get("partition"),
                    "dirty_ratio": part.get("dirty_ratio", part.get("dirty_ratio_after")),
                    "bytes": part.get("bytes", part.get("bytes_after")),
                    "last_clean_ms": part.get("last_clean_ms", part.get("finished_ms")),
                    "uncleanable": bool(part.get("uncleanable")),
                    "error": part.get("error"),
                    "reported_ms": body.get("finished_ms"),
                }
            )
    return sorted(rows, key=lambda r: (r["partition"], r["broker"]))


@runner("compact")
def run_compaction(job: Job) -> dict:
    topic = job.params["topic"]
    partitions = job.params.get("partitions")
    request_id = f"operation-{job.op.id}"
    placed = {p: r for (t, p), r in cluster.assignment([topic]).items() if t == topic}
    if not placed:
        raise JobFailed(f"Topic {topic!r} no longer exists.")
    wanted = sorted(placed) if partitions is None else partitions
    expected = {b for p in wanted for b in placed.get(p, [])}
    client = zk.client()
    path = CompactRequestZNode.topic_path(topic)
    clean = job.params.get("clean", True)
    request = CompactRequest(id=request_id, partitions=partitions, roll=clean, clean=clean)
    data = CompactRequestZNode.encode(request)
    current = client.exists(path) and CompactRequestZNode.decode(client.get(path)[0])
    if not current or current.id != request_id:
        client.ensure_path(CompactRequestZNode.path)
        if client.exists(path):
            client.set(path, data)
        else:
            client.create(path, data)
        what = "compact" if clean else "report the cleaner's standing figures of"
        job.step(f"asked brokers {sorted(expected)} to {what} {topic} {wanted}")
    job.progress(total=len(expected), done=0)

    def answered() -> bool:
        got = _results(topic, request_id)
        live = set(cluster.brokers())
        job.progress(done=len(got), waiting=sorted(expected - set(got)))
        return set(got) >= (expected & live)

    job.wait_for("every replica's compaction result", answered, WAIT_S)
    got = _results(topic, request_id)
    rows = []
    for b, body in sorted(got.items()):
        for part in body.get("partitions", []):
            rows.append({"broker": b, **part})
    errors = [r for r in rows if r.get("error")]
    job.step(
        f"{len(rows)} replica(s) compacted"
        + (f"; {len(errors)} failed: {errors[0]['error']}" if errors else "")
    )
    if clean and errors and len(errors) == len(rows):
        raise JobFailed(errors[0]["error"], {"replicas": rows})
    return {"topic": topic, "clean": clean, "replicas": rows}
