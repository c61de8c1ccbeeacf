"""One run: a cluster across hosts, the workload, a sequence of faults, the checker.

result = run_once(state_dir, faults=["kill-leader"], seed=1)
assert result.report.ok, result.report.summary()
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from faults import checker, converge
from faults.cluster import HostCluster
from faults.nemesis import FAULTS, heal_network
from faults.netns import Network
from faults.workload import PARTITIONS, TOPIC, TXN_TOPIC, Client, create_topics


@dataclass
class FaultWindow:
    kind: str
    what: str
    start: float
    healed: float
    unwritable_s: float = 0.0  # the longest stretch without an ack on some partition
    resumed_s: float = 0.0  # from the heal until every partition took a write again


@dataclass
class RunResult:
    report: checker.Report
    windows: list[FaultWindow] = field(default_factory=list)
    session_timeout_s: float = 6.0
    logs: Path | None = None
    counts: dict = field(default_factory=dict)  # what the workload did


def run_once(state_dir: Path, faults: list[str], seed: int = 0, n_zk: int = 1,
             session_timeout_ms: int = 6000, hold_s: float | None = None,
             recover_s: float = 10.0, log=print) -> RunResult:  # fmt: skip
    """Start a fresh cluster, run the workload through `faults` (one after another,
    each held `hold_s` then healed), then check histories and convergence."""
    rng = random.Random(seed)
    hold_s = hold_s or session_timeout_ms / 1000 + 4  # a pause must outlast the session
    state_dir.mkdir(parents=True, exist_ok=True)
    with Network() as net:
        cluster = HostCluster(net, state_dir, 3, n_zk, session_timeout_ms)
        try:
            return _run(cluster, state_dir, faults, rng, hold_s, recover_s, log)
        finally:
            Client.kill_all()
            cluster.stop()


def _run(cluster, out, faults, rng, hold_s, recover_s, log) -> RunResult:
    cluster.start()
    create_topics(cluster.bootstrap)
    cluster.wait(lambda: converge.settled(cluster, TOPIC) and converge.settled(cluster, TXN_TOPIC))
    seconds = 8 + len(faults) * (hold_s + recover_s)
    common = ["--bootstrap", cluster.bootstrap, "--partitions", str(PARTITIONS)]
    c1, c2 = cluster.clients
    workers = [
        Client(c1, out, "produce", "produce", *common, "--topic", TOPIC, "--seconds", f"{seconds}"),
        Client(c1, out, "txn", "txn", *common, "--topic", TXN_TOPIC, "--seconds", f"{seconds}"),
        Client(
            c2, out, "offsets", "offsets", *common, "--topic", TOPIC, "--seconds", f"{seconds + 10}"
        ),  # fmt: skip
    ]
    members: list[Client] = []
    windows = []
    time.sleep(4)
    for n, kind in enumerate(faults):
        # group members come and go around each fault
        members.append(Client(c2, out, f"member-{n}", "group", *common, "--topic", TOPIC,
                              "--seconds", f"{hold_s + recover_s + rng.uniform(0, 8)}"))  # fmt: skip
        fault = FAULTS[kind](cluster, rng)
        start = time.time()
        what = fault.start()
        log(f"  fault {n + 1}/{len(faults)}: {what}")
        time.sleep(hold_s)
        fault.heal()
        windows.append(FaultWindow(kind, what, start, time.time()))
        time.sleep(recover_s)
    # the writers and group members end; the offsets watcher watches 10 s longer, and
    # meanwhile (nothing below commits the group's offsets) the cluster settles and is read
    for client in workers[:2] + members:
        client.wait(seconds + 120)
    heal_network(cluster)
    for node in cluster.nodes:
        node.resume()
        node.start()
    cluster.wait(lambda: converge.settled(cluster, TOPIC) and converge.settled(cluster, TXN_TOPIC),
                 180)  # fmt: skip
    common_read = ["--bootstrap", cluster.bootstrap, "--partitions", str(PARTITIONS)]
    readers = [Client(c1, out, name, "read", *common_read, "--topic", topic)
               for name, topic in (("read", TOPIC), ("read-txn", TXN_TOPIC))]  # fmt: skip
    for reader in readers:  # both at once: a read_committed one ends after 5 s idle
        reader.wait(300)
    read, read_txn = (reader.history() for reader in readers)
    produced, txns = workers[0].history(), workers[1].history()
    report = checker.check_log(produced, [], [r for r in read if "v" in r])
    txn_report = checker.check_log([], txns, [r for r in read_txn if "v" in r])
    _merge(report, txn_report)
    for topic in (TOPIC, TXN_TOPIC):
        report.diverged += converge.diverged(cluster, topic, PARTITIONS)
    workers[2].wait(seconds + 120)
    report.offsets_backwards = checker.check_offsets(workers[2].history())
    acked = [r for r in produced if "o" in r]
    for w in windows:
        w.unwritable_s = checker.unwritable_seconds(acked, w.start, w.healed + recover_s)
        w.resumed_s = checker.resumed_after(acked, w.healed, PARTITIONS)
    commits = [r for m in members for r in m.history() if "commit" in r]
    counts = {
        "acked": len(acked),
        "txn_committed": sum(t["outcome"] == "commit" for t in txns),
        "txn_aborted": sum(t["outcome"] == "abort" for t in txns),
        "group_commits": len(commits),
    }
    return RunResult(report, windows, cluster.session_timeout_ms / 1000, out, counts)


def _merge(into: checker.Report, other: checker.Report) -> None:
    into.records += other.records
    names = ("lost", "duplicated", "unexpected", "reordered", "misplaced", "aborted_reads", "fatal")
    for name in names:
        getattr(into, name).extend(getattr(other, name))
