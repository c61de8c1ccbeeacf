"""A Quill cluster across hosts: ZooKeeper servers and brokers, each in its own
namespace (faults.netns), built by quill_stack.services exactly as `make run` builds them.

Every broker listens on 9092 and every ZooKeeper on 2181 of its own address; brokers get
a multi-host zookeeper.connect with a chroot (10.77.0.10:2181,...:2181/quill).
"""

from __future__ import annotations

import time
from pathlib import Path

from broker.server import clock_fault
from broker.zk.client import KafkaZkClient
from broker.zk.znodes import LeaderAndIsr
from faults.netns import Host, Network
from quill_stack import services
from quill_stack.process import ManagedProcess
from quill_stack.state import owner_env

CHROOT = "/quill"
BROKER_PORT = 9092
ZK_PORT = 2181
# ZooKeeper for the harness: ticks short enough for the session timeouts below.
ZK_SETTINGS = {"tickTime": "500", "minSessionTimeout": "1000", "maxSessionTimeout": "60000"}


class Node:
    """One process on one host: a ZooKeeper server or a broker."""

    def __init__(self, kind: str, ident: int, host: Host, spec, owner: Path):
        self.kind, self.id, self.host = kind, ident, host
        spec.argv = [*host.exec_prefix(), *spec.argv]
        if kind == "broker":  # its wall clock can be made to jump (set_clock_offset)
            self.clock_file = owner / f"{kind}-{ident}.clock"
            spec.env[clock_fault.ENV] = str(self.clock_file)
        self.proc = ManagedProcess(spec, owner_env(owner))
        self.paused = False

    def __repr__(self) -> str:
        return f"<{self.kind}-{self.id} {self.host.address}>"

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.id}"

    def start(self) -> None:
        if not self.proc.alive():
            self.proc.start()

    def kill(self) -> None:
        self.proc.kill()

    def pause(self) -> None:
        self.proc.pause()
        self.paused = True

    def resume(self) -> None:
        self.proc.resume()
        self.paused = False

    def set_clock_offset(self, seconds: float) -> None:
        """The broker's wall clock from now on: true time + `seconds` (within 50 ms)."""
        self.clock_file.write_text(f"{seconds}\n")


class HostCluster:
    """n_zk ZooKeeper servers (1: standalone; 3, 5: an ensemble) and n_brokers brokers."""

    def __init__(self, net: Network, state_dir: Path, n_brokers: int = 3, n_zk: int = 1,
                 session_timeout_ms: int = 6000, overrides: dict | None = None):  # fmt: skip
        self.net, self.state_dir = net, state_dir
        self.session_timeout_ms = session_timeout_ms
        zk_hosts = {n: net.add_host(f"zk{n}") for n in range(1, n_zk + 1)}
        members = {n: services.EnsembleMember(h.address, ZK_PORT) for n, h in zk_hosts.items()}
        self.zk_connect = services.ensemble_connect(members, CHROOT)
        self.zk_root = services.ensemble_connect(members)
        self.zookeepers = [
            Node("zookeeper", n, h, self._zk_spec(n, members), state_dir)
            for n, h in zk_hosts.items()
        ]
        props = {
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "min.insync.replicas": "2",
            "default.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "offsets.topic.replication.factor": "3",
            "unclean.leader.election.enable": "false",
            **(overrides or {}),
        }
        self.brokers = []
        for b in range(1, n_brokers + 1):
            host = net.add_host(f"b{b}")
            spec = services.broker_spec(
                state_dir, b, BROKER_PORT, self.zk_connect, n_brokers, host.address, props
            )
            self.brokers.append(Node("broker", b, host, spec, state_dir))
        self.clients = [net.add_host(f"c{n}") for n in range(1, 3)]
        self._zk: KafkaZkClient | None = None

    def _zk_spec(self, myid: int, members: dict[int, services.EnsembleMember]):
        if len(members) == 1:
            return services.zookeeper_spec(
                self.state_dir, ZK_PORT, members[myid].host, "zookeeper-1", ZK_SETTINGS
            )
        return services.zookeeper_ensemble_spec(self.state_dir, myid, members, ZK_SETTINGS)

    @property
    def nodes(self) -> list[Node]:
        return [*self.zookeepers, *self.brokers]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host.address}:{BROKER_PORT}" for b in self.brokers)

    def broker(self, broker_id: int) -> Node:
        return next(b for b in self.brokers if b.id == broker_id)

    def start(self) -> None:
        for zk in self.zookeepers:
            zk.start()
        for zk in self.zookeepers:
            zk.proc.wait_healthy(60)
        root = KafkaZkClient(self.zk_root)
        root.start(30)
        root.zk.ensure_path(CHROOT)
        root.close()
        for b in self.brokers:
            b.start()
        for b in self.brokers:
            b.proc.wait_healthy(90)

    def stop(self) -> None:
        if self._zk is not None:
            self._zk.close()
            self._zk = None
        for node in reversed(self.nodes):
            node.proc.resume()
            node.proc.kill()

    # ------------------------------------------------------------ what ZooKeeper says

    def zk(self) -> KafkaZkClient:
        if self._zk is None:
            self._zk = KafkaZkClient(self.zk_connect, 30000)
            self._zk.start(30)
        return self._zk

    def controller(self) -> int | None:
        return self.zk().get_controller_id()

    def partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        return self.zk().get_topic_partition_states(topic)

    def leader(self, topic: str, partition: int = 0) -> int | None:
        state = self.partition_states(topic).get(partition)
        return state.leader if state and state.leader >= 0 else None

    def wait(self, what, timeout: float = 120.0, delay: float = 0.5):
        """Poll `what()` until it returns something truthy; raise TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = what()
            except Exception as exc:  # ZooKeeper may be unreachable mid-fault
                last = exc
            if last and not isinstance(last, Exception):
                return last
            time.sleep(delay)
        raise TimeoutError(f"condition not met within {timeout:.0f}s: {last!r}")
