"""Reassignment execution (kinds reassign, rebalance, and the moving half of
decommission): a target assignment carried out through AlterPartitionReassignments in
batches, at most `max.concurrent.moves.per.broker` moves touching any one broker.

Each round reads the cluster (assignment in ZooKeeper, ListPartitionReassignments), so a
resumed run picks up where the cluster is: partitions already at their target are done,
partitions still moving are waited for, the rest start in later batches. With a
throttle, `*.replication.throttled.rate` is set on the moving partitions' brokers and the
topics' `*.throttled.replicas` name the moving replicas, only while something moves;
every throttle goes at the end, on success, failure or cancel. Cancel is Kafka's: the
partitions in flight go back to their original replicas; those done stay done.
"""

from __future__ import annotations

import time
from collections import Counter

from kazoo.exceptions import KazooException

from cluster_client.errors import ClusterUnavailable
from operations import cluster
from operations.jobs import Cancelled, Job, JobFailed, runner

Part = tuple[str, int]
DEFAULT_MAX_MOVES = 5  # Cruise Control's num.concurrent.partition.movements.per.broker
CANCEL_WAIT_S = 120
RETRY_S = 300  # how long the cluster may not answer before the job fails


def parse_plan(plan: dict) -> dict[Part, list[int]]:
    """Kafka's reassignment JSON -> {(topic, partition): replicas}. Raises ValueError
    with a sentence for a malformed plan."""
    if not isinstance(plan, dict) or not isinstance(plan.get("partitions"), list):
        raise ValueError(
            'A plan is Kafka\'s reassignment JSON: {"version": 1, "partitions": [...]}'
        )
    out: dict[Part, list[int]] = {}
    for i, entry in enumerate(plan["partitions"]):
        try:
            topic, partition = str(entry["topic"]), int(entry["partition"])
            replicas = [int(b) for b in entry["replicas"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(
                f"partitions[{i}] needs topic, partition and replicas (a list of broker ids)."
            ) from exc
        if not replicas or len(set(replicas)) != len(replicas):
            raise ValueError(
                f"partitions[{i}] ({topic}-{partition}): replicas {replicas} "
                "must be a non-empty list without duplicates."
            )
        if (topic, partition) in out:
            raise ValueError(f"{topic}-{partition} appears twice in the plan.")
        out[(topic, partition)] = replicas
    if not out:
        raise ValueError("The plan moves no partition.")
    return out


def _key(part: Part) -> str:
    return f"{part[0]}-{part[1]}"


def _involved(old: list[int], new: list[int]) -> set[int]:
    """Brokers a move loads: the ones gaining or losing the replica."""
    return set(old) ^ set(new)


class Execution:
    def __init__(self, job: Job, target: dict[Part, list[int]]):
        self.job = job
        self.target = target
        self.topics = {t for t, _ in target}
        self.max_moves = int(job.params.get("max_moves_per_broker") or DEFAULT_MAX_MOVES)
        self.throttle = job.params.get("throttle")
        ck = job.checkpoint
        if "original" not in ck:
            current = cluster.assignment(sorted(self.topics))
            original = {_key(p): current.get(p, []) for p in target}
            job.save_checkpoint(original=original)
        self.original = {p: self.job.checkpoint["original"][_key(p)] for p in target}
        self.sizes: dict[Part, int] = {}
        self.started_at = time.monotonic()
        self.stalled_said: set[tuple[Part, int]] = set()
        self.failing_since: float | None = None

    def brokers_involved(self) -> set[int]:
        return {b for p in self.target for b in self.original[p] + self.target[p]}

    def run(self) -> dict:
        job = self.job
        job.step(
            f"{len(self.target)} partitions to move, at most {self.max_moves} moves per broker"
            + (f", throttle {self.throttle} B/s" if self.throttle else "")
        )
        self.sizes = cluster.partition_sizes()
        total_bytes = sum(
            self.sizes.get(p, 0) * len(set(self.target[p]) - set(self.original[p]))
            for p in self.target
        )
        job.progress(total=len(self.target), done=0, bytes_total=total_bytes)
        try:
            while not self.round(total_bytes):
                job.sleep(1)
        except Cancelled:
            raise Cancelled(self.cancel()) from None
        finally:
            removed = cluster.remove_throttles(self.topics, self.brokers_involved())
            if removed:
                job.step(f"throttles removed from {', '.join(removed)}")
        return {"moved": len(self.target), "bytes_moved": total_bytes}

    def round(self, total_bytes: int) -> bool:
        """One look at the cluster and what to start; True once every move is done. A
        cluster that does not answer (a broker or the controller restarting) is retried
        for up to RETRY_S before the job fails."""
        self.job.check()
        try:
            done, moving, pending = self.classify()
            self.report(done, moving, total_bytes)
            if not pending and not moving:
                return True
            batch = self.next_batch(moving, pending)
            if batch:
                self.start(batch, moving)
            elif not moving:
                raise JobFailed("Nothing is moving and nothing can start.")
        except (ClusterUnavailable, KazooException) as exc:
            why = getattr(exc, "message", None) or repr(exc)
            now = time.monotonic()
            if self.failing_since is None:
                self.failing_since = now
                self.job.step(f"the cluster did not answer ({why}); retrying")
            elif now - self.failing_since > RETRY_S:
                raise JobFailed(f"The cluster has not answered for {RETRY_S} s: {why}") from None
            return False
        if self.failing_since is not None:
            self.failing_since = None
            self.job.step("the cluster answers again")
        return False

    def classify(self) -> tuple[list[Part], list[Part], list[Part]]:
        current = cluster.assignment(sorted(self.topics))
        in_progress = cluster.list_reassignments()
        done, moving, pending = [], [], []
        for part, replicas in self.target.items():
            if part in in_progress:
                moving.append(part)
            elif current.get(part) == replicas:
                done.append(part)
            else:
                pending.append(part)
        missing = [p for p in self.target if p not in current]
        if missing:
            raise JobFailed(f"{_key(missing[0])} no longer exists (topic deleted?).")
        return done, moving, pending

    def next_batch(self, moving: list[Part], pending: list[Part]) -> list[Part]:
        load = Counter()
        for part in moving:
            load.update(_involved(self.original[part], self.target[part]))
        batch = []
        for part in sorted(pending):
            brokers = _involved(self.original[part], self.target[part])
            if all(load[b] < self.max_moves for b in brokers):
                load.update(brokers)
                batch.append(part)
        return batch

    def start(self, batch: list[Part], moving: list[Part]) -> None:
        if self.throttle:
            flight = {
                p: {"from": self.original[p], "to": self.target[p]} for p in [*moving, *batch]
            }
            cluster.set_throttles(int(self.throttle), flight)
        failed = cluster.alter_reassignments({p: self.target[p] for p in batch})
        started = [p for p in batch if p not in failed]
        if started:
            self.job.step(
                "moving "
                + ", ".join(f"{_key(p)} {self.original[p]} -> {self.target[p]}" for p in started)
            )
        if failed:
            part, (code, message) = sorted(failed.items())[0]
            raise JobFailed(
                f"The controller refused {len(failed)} move(s); {_key(part)}: {code} {message}"
            )

    def report(self, done: list[Part], moving: list[Part], total_bytes: int) -> None:
        live = cluster.brokers()
        caught = sum(
            self.sizes.get(p, 0) * len(set(self.target[p]) - set(self.original[p])) for p in done
        )
        per_replica = {}
        if moving:
            sizes = cluster.replica_sizes(live)
            for part in moving:
                for b in set(self.target[part]) - set(self.original[part]):
                    have = sizes.get((b, part), 0)
                    per_replica[f"{_key(part)}@{b}"] = {
                        "bytes": have,
                        "of": self.sizes.get(part, 0),
                    }
                    caught += min(have, self.sizes.get(part, 0))
                    if b not in live and (part, b) not in self.stalled_said:
                        self.stalled_said.add((part, b))
                        self.job.step(f"stalled: {_key(part)} waits for broker {b}, which is down")
        elapsed = max(time.monotonic() - self.started_at, 1e-3)
        rate = caught / elapsed
        left = max(total_bytes - caught, 0)
        self.job.progress(
            done=len(done),
            moving=len(moving),
            bytes_caught_up=caught,
            replicas=per_replica,
            eta_s=round(left / rate) if rate > 0 and left else 0,
            stalled=sorted(f"{_key(p)}@{b}" for p, b in self.stalled_said if p in moving),
        )

    def cancel(self) -> dict:
        """Kafka's cancel: the partitions in flight go back to their original replicas."""
        job = self.job
        _done, moving, _pending = self.classify()
        if moving:
            failed = cluster.alter_reassignments(dict.fromkeys(moving, None))
            job.step(f"cancelling {len(moving)} move(s) in flight: back to the original replicas")
            deadline = time.monotonic() + CANCEL_WAIT_S
            while time.monotonic() < deadline:
                still = set(cluster.list_reassignments()) & set(moving)
                if not still:
                    break
                time.sleep(1)
            if failed:
                job.step(f"the controller refused to cancel: {sorted(map(_key, failed))}")
        done, _moving, _pending = self.classify()
        return {
            "done": sorted(map(_key, done)),
            "reverted": sorted(map(_key, moving)),
            "not_started": len(self.target) - len(done) - len(moving),
        }


@runner("reassign")
@runner("rebalance")
def run_reassignment(job: Job) -> dict:
    try:
        target = parse_plan(job.params.get("plan"))
    except ValueError as exc:
        raise JobFailed(str(exc)) from None
    return Execution(job, target).run()
