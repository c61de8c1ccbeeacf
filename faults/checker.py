"""Jepsen's properties of a Kafka-like log, checked over what the clients recorded.

Pure functions over histories (lists of the JSON objects faults.client prints); the
result is a `Report` whose counts the tests assert on and the soak prints.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Report:
    records: int = 0  # acknowledged writes (idempotent producers) + committed txn records
    lost: list = field(default_factory=list)  # acknowledged, never read
    duplicated: list = field(default_factory=list)  # read more than once
    unexpected: list = field(default_factory=list)  # read, never sent
    reordered: list = field(default_factory=list)  # one writer's acks out of order
    misplaced: list = field(default_factory=list)  # read at another partition/offset than acked
    aborted_reads: list = field(default_factory=list)  # read_committed saw an aborted txn
    offsets_backwards: list = field(default_factory=list)  # a group's committed offset fell
    diverged: list = field(default_factory=list)  # convergence failures (faults.converge)
    fatal: list = field(default_factory=list)  # producers that failed fatally (not a violation)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.reordered
                    or self.misplaced or self.aborted_reads or self.offsets_backwards
                    or self.diverged)  # fmt: skip

    def summary(self) -> str:
        parts = [f"records={self.records}"]
        for name in ("lost", "duplicated", "unexpected", "reordered", "misplaced",
                     "aborted_reads", "offsets_backwards", "diverged", "fatal"):  # fmt: skip
            items = getattr(self, name)
            if items:
                parts.append(f"{name}={len(items)} e.g. {items[:5]}")
        return " ".join(parts)


def check_log(produced: list[dict], txns: list[dict], read: list[dict]) -> Report:
    """Every acknowledged record read back exactly once, where it was acknowledged and in
    its writer's order; nothing read that was never sent; no aborted txn's record read."""
    report = Report()
    seen = Counter(r["v"] for r in read if "v" in r)
    where = {r["v"]: (r["p"], r["o"]) for r in read if "v" in r}
    report.duplicated = sorted(v for v, n in seen.items() if n > 1)
    sent = {r["v"] for r in produced if "v" in r}
    for r in produced:  # every record handed to a producer, reported on or not
        if "sent" in r:
            sent.update(f"{r['writer']}-{i}" for i in range(r["sent"]))
    acked = [r for r in produced if "o" in r]
    report.records = len(acked)
    for r in acked:
        # "o": null is librdkafka's acknowledgement without an offset (an idempotent
        # batch whose answer was lost, known written once a later batch was taken): its
        # partition and its place in its writer's order are checked where it was read
        if r["v"] not in seen:
            report.lost.append(r["v"])
        elif where[r["v"]] != (r["p"], r["o"] if r["o"] is not None else where[r["v"]][1]):
            report.misplaced.append((r["v"], (r["p"], r["o"]), where[r["v"]]))
    report.reordered = _reordered(
        [{**r, "o": where[r["v"]][1]} if r["o"] is None and r["v"] in where else r for r in acked]
    )
    committed, aborted, unknown = set(), set(), set()
    for t in txns:
        {"commit": committed, "abort": aborted}.get(t["outcome"], unknown).update(t["vals"])
    report.records += len(committed)
    report.lost += sorted(v for v in committed if v not in seen)
    report.aborted_reads = sorted(v for v in seen if v in aborted)
    sent |= committed | aborted | unknown
    report.unexpected = sorted(v for v in seen if v not in sent)
    report.fatal = [r["fatal"] for r in produced if "fatal" in r]
    return report


def _reordered(acked: list[dict]) -> list:
    """Within a partition, one writer's records in the order it sent them (their
    sequence numbers) must have increasing offsets."""
    by_writer = defaultdict(list)
    for r in acked:
        if r["o"] is None:
            continue  # acknowledged without an offset, and not read back (lost)
        writer, seq = r["v"].rsplit("-", 1)
        by_writer[(writer, r["p"])].append((int(seq), r["o"]))
    bad = []
    for key, pairs in by_writer.items():
        pairs.sort()
        bad += [(key, a, b) for a, b in zip(pairs, pairs[1:], strict=False) if b[1] <= a[1]]
    return bad


def check_offsets(watched: list[dict]) -> list:
    """A group's committed offset of a partition never moves backwards."""
    last: dict[int, int] = {}
    bad = []
    for r in sorted(watched, key=lambda r: r["t"]):
        p, o = r["p"], r["o"]
        if o < last.get(p, -1):
            bad.append((p, last[p], o))
        last[p] = max(o, last.get(p, -1))
    return bad


def unwritable_seconds(acked: list[dict], start: float, end: float) -> float:
    """The longest stretch, across partitions, with no acknowledged write while a fault
    was in force (between `start` and `end`, a fault's window plus its recovery)."""
    by_partition = defaultdict(list)
    for r in acked:
        if "t" in r:
            by_partition[r["p"]].append(r["t"])
    longest = 0.0
    for times in by_partition.values():
        inside = sorted(t for t in times if start <= t <= end)
        before = [t for t in times if t < start]
        points = [max(before) if before else start, *inside]
        after = [t for t in times if t > end]
        if after:
            points.append(min(after))
        longest = max([longest] + [b - a for a, b in zip(points, points[1:], strict=False)])
    return longest


def resumed_after(acked: list[dict], moment: float, partitions: int) -> float:
    """Seconds from `moment` (a fault healed) until every partition had acknowledged a
    write again: the issue's target is zookeeper.session.timeout.ms + 2 s. A partition
    with no acknowledged write after `moment` counts as never (infinity)."""
    first: dict[int, float] = {}
    for r in acked:
        t = r.get("t")
        if t is not None and t > moment and t < first.get(r["p"], float("inf")):
            first[r["p"]] = t
    if len(first) < partitions:
        return float("inf")
    return max(first.values()) - moment
