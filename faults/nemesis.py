"""Faults: what goes wrong on a HostCluster, and how each is healed.

A fault is `Fault(kind, start, heal)`: `start()` breaks something and returns a
description; `heal()` puts it right (restart, SIGCONT, flush the rules). Partitions drop
packets with iptables inside the isolated hosts' namespaces (both directions), netem
slows and loses packets on a host's link (or, on a kernel without sch_netem, NFQUEUE and
faults.delay do).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from faults.cluster import HostCluster, Node
from faults.netns import Host, NetError
from quill_stack.services import PROJECT_ROOT

TOPIC_OF_LEADER = "faults"  # the topic whose partition-0 leader the targeted faults pick


@dataclass
class Fault:
    kind: str
    start: Callable[[], str]
    heal: Callable[[], None]


def isolate(host: Host, peers: list[Host]) -> None:
    """Drop every packet between `host` and each of `peers`."""
    for peer in peers:
        host.ns("iptables", "-A", "INPUT", "-s", peer.address, "-j", "DROP")
        host.ns("iptables", "-A", "OUTPUT", "-d", peer.address, "-j", "DROP")


def heal_network(cluster: HostCluster) -> None:
    for host in cluster.net.hosts.values():
        host.ns("iptables", "-F", check=False)
        host.ns("tc", "qdisc", "del", "dev", "eth0", "root", check=False)
    while DELAYERS:  # their rules are gone: nothing new is queued, what waits goes out
        proc = DELAYERS.pop()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


DELAYERS: list[subprocess.Popen] = []  # faults.delay processes, stopped by heal_network


def slow_link(host: Host, delay_ms: int, loss: float, seed: int, log_dir) -> str:
    """Delay everything leaving `host` by `delay_ms` and drop `loss` of it: tc netem,
    or without sch_netem, an NFQUEUE rule and a faults.delay process in the host."""
    added = host.ns("tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                    f"{delay_ms}ms", "loss", f"{loss:.0%}", check=False)  # fmt: skip
    if added.returncode == 0:
        return "netem"
    argv = [*host.exec_prefix(), sys.executable, "-m", "faults.delay", "--delay-ms",
            str(delay_ms), "--loss", str(loss), "--seed", str(seed)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log_dir / f"delay-{host.name}.log", "w") as out:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out, env=env, text=True,
                                cwd=PROJECT_ROOT, start_new_session=True)  # fmt: skip
    DELAYERS.append(proc)
    if not proc.stdout.readline().startswith("delaying"):  # bound to its queue, or dead
        raise NetError(f"faults.delay did not start in {host.netns} (see delay-{host.name}.log)")
    host.ns("iptables", "-A", "OUTPUT", "-o", "eth0", "-j", "NFQUEUE", "--queue-num", "0",
            "--queue-bypass")  # fmt: skip
    return "nfqueue"


def _leader(cluster: HostCluster) -> Node:
    leader = cluster.wait(lambda: cluster.leader(TOPIC_OF_LEADER, 0), 60)
    return cluster.broker(leader)


def _hosts(nodes: list[Node]) -> list[Host]:
    return [n.host for n in nodes]


def _on_broker(cluster: HostCluster, target: str, kind: str, verb: str, act, undo) -> Fault:
    """A fault on one broker process: the leader of faults-0, or the controller."""
    node: list[Node] = []

    def start() -> str:
        victim = _leader(cluster) if target == "leader" else cluster.broker(cluster.controller())
        node.append(victim)
        act(victim)
        return f"{verb} {victim.name} ({target})"

    return Fault(f"{kind}-{target}", start, lambda: undo(node[0]))


def kill(cluster: HostCluster, rng: random.Random, target: str = "leader") -> Fault:
    """kill -9 a broker; restart it on heal."""
    return _on_broker(cluster, target, "kill", "kill -9", Node.kill, Node.start)


def pause(cluster: HostCluster, rng: random.Random, target: str = "leader") -> Fault:
    """SIGSTOP a broker for longer than the session timeout: it comes back a zombie
    (its session gone, its controller epoch or leader epoch stale)."""
    return _on_broker(cluster, target, "pause", "SIGSTOP", Node.pause, Node.resume)


CLOCK_JUMP_S = 3600.0  # an hour: well inside retention.ms, far past every session timeout


def clock_jump(cluster: HostCluster, rng: random.Random, target: str = "leader") -> Fault:
    """Step a broker's wall clock an hour forward or back, as NTP stepping its host's
    clock would, and back to the true time on heal (a second jump). Record timestamps,
    time indexes, group sessions and transaction timeouts on that broker see the jumps;
    its monotonic clock does not (broker/server/clock_fault.py)."""
    offset = rng.choice([CLOCK_JUMP_S, -CLOCK_JUMP_S])
    return _on_broker(cluster, target, "clock-jump", f"wall clock {offset:+.0f} s on",
                      lambda n: n.set_clock_offset(offset), lambda n: n.set_clock_offset(0))  # fmt: skip


def partition(cluster: HostCluster, rng: random.Random, kind: str) -> Fault:
    def start() -> str:
        zks, brokers = cluster.zookeepers, cluster.brokers
        if kind == "zk-minority":
            cut = rng.sample(zks, (len(zks) - 1) // 2)
            for zk in cut:
                isolate(zk.host, [h for h in cluster.net.hosts.values() if h != zk.host])
            return f"ZooKeeper minority {[z.name for z in cut]} cut off"
        if kind == "zk-majority":
            cut = rng.sample(zks, len(zks) // 2 + 1)
            for zk in cut:
                isolate(zk.host, [h for h in cluster.net.hosts.values() if h != zk.host])
            return f"ZooKeeper majority {[z.name for z in cut]} cut off"
        if kind == "bridge":
            # two halves that each see the middle broker but not each other
            nodes = rng.sample(cluster.nodes, len(cluster.nodes))
            middle, half = nodes[0], (len(nodes) - 1) // 2
            left, right = nodes[1 : 1 + half], nodes[1 + half :]
            for node in left:
                isolate(node.host, _hosts(right))
            return f"bridge: {[n.name for n in left]} | {middle.name} | {[n.name for n in right]}"
        leader = _leader(cluster)
        others = [b for b in brokers if b is not leader]
        if kind == "leader-zk":
            isolate(leader.host, _hosts(zks))
        elif kind == "leader-followers":
            isolate(leader.host, _hosts(others))
        elif kind == "leader-all-but-clients":
            isolate(leader.host, _hosts(zks) + _hosts(others))
        else:
            raise ValueError(f"unknown partition {kind}")
        return f"{kind}: {leader.name} isolated"

    return Fault(f"partition-{kind}", start, lambda: heal_network(cluster))


def netem(cluster: HostCluster, rng: random.Random) -> Fault:
    """50-200 ms delay (one per host) and 5 % loss on every broker's and ZooKeeper's
    outgoing link: tc netem, or NFQUEUE and faults.delay where the kernel has no netem."""

    def start() -> str:
        ways = {
            slow_link(
                node.host, rng.randint(50, 200), 0.05, rng.randrange(1 << 30), cluster.state_dir
            )  # fmt: skip
            for node in cluster.nodes
        }
        return f"delay 50-200 ms and 5% loss on every node ({', '.join(sorted(ways))})"

    return Fault("netem", start, lambda: heal_network(cluster))


FAULTS: dict[str, Callable[[HostCluster, random.Random], Fault]] = {
    "kill-leader": lambda c, r: kill(c, r, "leader"),
    "kill-controller": lambda c, r: kill(c, r, "controller"),
    "pause-leader": lambda c, r: pause(c, r, "leader"),
    "pause-controller": lambda c, r: pause(c, r, "controller"),
    "clock-jump-leader": lambda c, r: clock_jump(c, r, "leader"),
    "clock-jump-controller": lambda c, r: clock_jump(c, r, "controller"),
    "partition-leader-zk": lambda c, r: partition(c, r, "leader-zk"),
    "partition-leader-followers": lambda c, r: partition(c, r, "leader-followers"),
    "partition-leader-all-but-clients": lambda c, r: partition(c, r, "leader-all-but-clients"),
    "partition-zk-minority": lambda c, r: partition(c, r, "zk-minority"),
    "partition-zk-majority": lambda c, r: partition(c, r, "zk-majority"),
    "partition-bridge": lambda c, r: partition(c, r, "bridge"),
    "netem": netem,
}
