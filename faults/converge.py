"""After the faults: the cluster converges. One live leader per partition, the ISR
within the replicas and back to full size, and every in-sync replica's log equal to the
leader's up to the high watermark (compared with quill-dump-log, record by record).
"""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Consumer, TopicPartition

from faults.cluster import HostCluster


def settled(cluster: HostCluster, topic: str) -> bool:
    """Every partition led by a live broker with every replica back in the ISR."""
    states = cluster.partition_states(topic)
    assignment = cluster.zk().get_topic_assignment(topic)
    if not states or assignment is None:
        return False
    live = set(cluster.zk().zk.get_children("/brokers/ids"))
    for p, state in states.items():
        replicas = assignment.partitions[p]
        if str(state.leader) not in live or set(state.isr) != set(replicas):
            return False
    return True


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "faults-converge"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
                for p in range(partitions)}  # fmt: skip
    finally:
        consumer.close()


def segments(cluster: HostCluster, broker_id: int, topic: str, p: int) -> list[str]:
    """The .log segment files of one replica, oldest first."""
    log_dir = cluster.broker(broker_id).proc.spec.dirs[0] / f"{topic}-{p}"
    return sorted(str(f) for f in log_dir.glob("*.log"))


def dump_records(files: list[str]) -> dict[str, list[str]]:
    """file -> its record lines (``| offset: ...``), from one quill-dump-log run over
    every file (one Python start-up, not one a replica)."""
    lines: dict[str, list[str]] = {f: [] for f in files}
    if not files:
        return lines
    out = subprocess.run(
        [sys.executable, "-m", "broker.cli.dump_log", "--files", ",".join(files),
         "--print-data-log"], capture_output=True, text=True, timeout=300, check=False,
    ).stdout  # fmt: skip
    current: list[str] = []
    for line in out.splitlines():
        if line.startswith("Dumping "):
            current = lines.setdefault(line.removeprefix("Dumping "), [])
        elif line.startswith("| offset: "):
            current.append(line)
    return lines


def diverged(cluster: HostCluster, topic: str, partitions: int) -> list:
    """Partitions whose in-sync replicas' logs differ from the leader's below the HW."""
    hws = high_watermarks(cluster.bootstrap, topic, partitions)
    states = cluster.partition_states(topic)
    files = {(p, b): segments(cluster, b, topic, p)
             for p, state in states.items() for b in {state.leader, *state.isr}}  # fmt: skip
    dumped = dump_records([f for fs in files.values() for f in fs])
    logs = {(p, b): [line for f in fs for line in dumped[f] if int(line.split()[2]) < hws[p]]
            for (p, b), fs in files.items()}  # fmt: skip
    bad = []
    for p, state in states.items():
        leader_log = logs[p, state.leader]
        if len(leader_log) == 0 and hws[p] > 0:
            bad.append((topic, p, "leader has no records below the HW", hws[p]))
        for replica in state.isr:
            if replica == state.leader:
                continue
            other = logs[p, replica]
            if other != leader_log:
                first = next((i for i, (a, b) in enumerate(zip(leader_log, other, strict=False))
                              if a != b), min(len(leader_log), len(other)))  # fmt: skip
                bad.append((topic, p, f"broker {replica} differs from leader {state.leader} "
                            f"at record {first} (hw {hws[p]})"))  # fmt: skip
    return bad
