"""Zombies and stale state (issue 27), as ZooKeeper-era Kafka fences them.

- Broker epochs (KIP-380): the czxid of ``/brokers/ids/<id>``. A controller request
  (LeaderAndIsr, UpdateMetadata, StopReplica) carrying an older one gets
  STALE_BROKER_EPOCH (77) and changes nothing; so does a ControlledShutdown to the
  controller. An older controller epoch gets STALE_CONTROLLER_EPOCH (11).
- The zombie leader: a leader cut from ZooKeeper past its session timeout, or paused
  (SIGSTOP) past it, acknowledges nothing its successor lacks, and once it hears its
  session expired it stops leading (NOT_LEADER_OR_FOLLOWER, 6); every record the
  cluster acknowledged is read back exactly once.
- The controller's removal of a dead follower from the ISR writes the next leader
  epoch; followers and consumers carry on at it (OffsetForLeaderEpoch answers it).

One cluster for the module; broker 1 reaches ZooKeeper through a proxy the test cuts.
replica.lag.time.max.ms is long, so ISR shrinks here are the controller's, not the
leader's.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster_helpers import (
    FAST,
    BackgroundProducer,
    assert_read_back_once,
    partition_state,
    read_all,
)
from tests.log_helpers import batch
from tests.proxy import DroppingProxy
from tests.wait_helpers import wait_log, wait_until
from tests.wire import WireClient, produce_body

pytestmark = pytest.mark.cluster

CUT = 1  # the broker whose ZooKeeper connection goes through the proxy
STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH, NOT_LEADER_OR_FOLLOWER = 77, 11, 6
FENCED_LEADER_EPOCH = 74


@pytest.fixture(scope="module")
def zk_proxy(zookeeper):
    proxy = DroppingProxy(target=(zookeeper.host, zookeeper.port))
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def zombies(cluster_factory, zookeeper, zk_proxy):
    chroot = f"/quill-zombies-{uuid.uuid4().hex[:8]}"

    def zk_connect(broker_id: int, _port: int) -> str:
        via = f"127.0.0.1:{zk_proxy.port}" if broker_id == CUT else zookeeper.address
        return via + chroot

    settings = {
        **FAST,
        "replica.lag.time.max.ms": "30000",
        "auto.leader.rebalance.enable": "false",
        "zookeeper.connect": zk_connect,
    }
    return cluster_factory(3, chroot=chroot, **settings)


def _topic(cluster, replicas: list[int]) -> str:
    name = f"zombie-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": "2"}
    new = NewTopic(name, 1, replica_assignment=[replicas], config=config)
    admin.create_topics([new])[name].result(30)
    _wait_isr(cluster, name, 3)
    return name


def _wait_isr(cluster, topic: str, size: int, timeout: float = 90) -> dict:
    return wait_until(
        lambda: (s := _state(cluster, topic)) is not None and len(s["isr"]) == size and s,
        timeout,
        f"{topic}'s ISR to hold {size} replicas",
    )


def _state(cluster, topic: str) -> dict | None:
    try:
        return partition_state(cluster, topic, 0)
    except Exception:  # noqa: BLE001 - not created yet
        return None


def _zk(cluster):
    if not hasattr(cluster, "_zombie_zk"):
        cluster._zombie_zk = cluster.zk_client()
    return cluster._zombie_zk


def _broker_epoch(cluster, broker_id: int) -> int:
    return _zk(cluster).exists(f"/brokers/ids/{broker_id}").czxid


def _controller(cluster) -> tuple[int, int]:
    """(controller id, controller epoch)."""
    zk = _zk(cluster)
    return (
        json.loads(zk.get("/controller")[0])["brokerid"],
        int(zk.get("/controller_epoch")[0]),
    )


def _stopped(pid: int) -> bool:
    """Every thread of ``pid`` is stopped (SIGSTOP has taken effect)."""
    tasks = Path(f"/proc/{pid}/task")
    states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0] for t in tasks.iterdir()]
    return all(state in ("T", "t") for state in states)


def _wire(cluster, broker_id: int) -> WireClient:
    return WireClient("127.0.0.1", cluster.broker(broker_id).port, timeout=30)


def _produce(cluster, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [b"%09d" % i for i in range(count)]
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0
    return values


def _offset_for_leader_epoch(topic: str, current: int, epoch: int) -> dict:
    """OffsetForLeaderEpoch v3 as a client asks it (replica id -1)."""
    partition = {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [partition]}]}


def _from_controller(controller: tuple[int, int], broker_epoch: int, **body) -> dict:
    """A controller request's body: its controller id and epoch, the broker epoch."""
    controller_id, controller_epoch = controller
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        **body,
    }


def _controller_requests(topic, state, controller, broker_epoch) -> dict[int, dict]:
    """api key -> body: LeaderAndIsr handing the partition to broker 3 at a later epoch,
    StopReplica deleting it, an empty UpdateMetadata."""
    leader_3 = {
        "partition_index": 0,
        "controller_epoch": controller[1],
        "leader": 3,
        "leader_epoch": state["leader_epoch"] + 5,
        "isr": [3],
        "zk_version": 99,
        "replicas": [2, 3, 1],
    }
    delete = {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}
    return {
        4: _from_controller(
            controller,
            broker_epoch,
            topic_states=[{"topic_name": topic, "partition_states": [leader_3]}],
            live_leaders=[],
        ),
        5: _from_controller(
            controller,
            broker_epoch,
            topic_states=[{"topic_name": topic, "partition_states": [delete]}],
        ),
        6: _from_controller(controller, broker_epoch, topic_states=[], live_brokers=[]),
    }


def test_stale_broker_and_controller_epochs_are_refused(zombies):
    topic = _topic(zombies, [2, 3, 1])
    state = partition_state(zombies, topic, 0)
    epoch = _broker_epoch(zombies, 2)
    controller_id, controller_epoch = controller = _controller(zombies)
    older_controller = (controller_id, controller_epoch - 1)
    wire = _wire(zombies, 2)
    try:
        versions = {4: 4, 6: 7, 5: 3}  # LeaderAndIsr, UpdateMetadata, StopReplica
        for ctl, broker_epoch, want in (
            (controller, epoch - 1, STALE_BROKER_EPOCH),
            (older_controller, epoch, STALE_CONTROLLER_EPOCH),
        ):
            for api, body in _controller_requests(topic, state, ctl, broker_epoch).items():
                resp = wire.request(api, versions[api], body)
                assert resp.error_code == want, (api, ctl, broker_epoch, resp)
        # nothing changed: broker 2 still leads, keeps its log, and takes a write
        assert wire.produce(topic, 0, bytes(batch(3)), acks=-1).error_code == 0
        assert wire.list_offset(topic, 0, -1).offset == 3
        assert partition_state(zombies, topic, 0)["leader"] == 2
    finally:
        wire.close()

    # ControlledShutdown to the controller with a stale broker epoch: refused, no move
    wire = _wire(zombies, controller_id)
    try:
        resp = wire.request(7, 3, {"broker_id": 2, "broker_epoch": _broker_epoch(zombies, 2) - 1})
        assert resp.error_code == STALE_BROKER_EPOCH
    finally:
        wire.close()
    after = partition_state(zombies, topic, 0)
    assert (after["leader"], after["leader_epoch"]) == (2, state["leader_epoch"])


def test_controller_removing_a_dead_follower_bumps_the_leader_epoch(zombies):
    topic = _topic(zombies, [2, 1, 3])
    before = partition_state(zombies, topic, 0)
    first = _produce(zombies, topic, 50)
    zombies.broker(3).kill()
    try:
        after = _wait_isr(zombies, topic, 2)
        assert after["leader"] == 2 and 3 not in after["isr"]
        assert after["leader_epoch"] > before["leader_epoch"]
        # OffsetForLeaderEpoch at the new epoch: the old epoch ends where the new began
        wire = _wire(zombies, 2)
        try:
            ask = _offset_for_leader_epoch(topic, after["leader_epoch"], before["leader_epoch"])
            wait_until(  # the leader has taken the controller's LeaderAndIsr
                lambda: wire.request(23, 3, ask).topics[0].partitions[0].error_code == 0,
                what="the leader to lead at the new epoch",
            )
            second = _produce(zombies, topic, 50)  # acks=all, min.insync.replicas=2: 2 and 1
            answer = wire.request(23, 3, ask).topics[0].partitions[0]
            assert (answer.error_code, answer.leader_epoch) == (0, before["leader_epoch"])
            assert answer.end_offset == 50
            stale = _offset_for_leader_epoch(topic, before["leader_epoch"], before["leader_epoch"])
            assert wire.request(23, 3, stale).topics[0].partitions[0].error_code == (
                FENCED_LEADER_EPOCH
            )
        finally:
            wire.close()
    finally:
        zombies.broker(3).start()
    back = _wait_isr(zombies, topic, 3)
    assert back["leader"] == 2 and back["leader_epoch"] >= after["leader_epoch"]
    low, high, records = read_all(zombies.bootstrap, topic, 1)[0]
    assert (low, high) == (0, 100)
    assert [v for _o, v in records] == first + second


def test_leader_cut_from_zookeeper_acknowledges_nothing_and_stops_leading(
    zombies, zk_proxy, zookeeper
):
    """Cut off from ZooKeeper only, the leader cannot know its session expired (nor can
    it tell that from a ZooKeeper without quorum, which expires no session): it keeps
    leading, but its followers follow the new leader, so an acks=all write to it is not
    acknowledged. Back in touch, it hears of the expiry and stops leading at once."""
    topic = _topic(zombies, [CUT, 2, 3])
    producer = BackgroundProducer(zombies.bootstrap, topic)
    producer.start()
    wire = _wire(zombies, CUT)
    value = b"zombie0-" + b"x" * 10  # the one record of batch(1, tag=b"zombie")
    try:
        wait_until(lambda: len(producer.acked[0]) > 50, what="acknowledged writes")
        zk_proxy.target = None  # new connections are refused, the open ones cut
        zk_proxy.drop_all()
        wait_until(
            lambda: (s := _state(zombies, topic)) and s["leader"] not in (-1, CUT),
            what="the controller to move the leadership off the cut broker",
        )
        answer = wire.produce(topic, 0, bytes(batch(1, tag=b"zombie")), acks=-1)
        assert answer.error_code in (0, NOT_LEADER_OR_FOLLOWER, 7), answer  # 7: timed out
        zk_proxy.target = (zookeeper.host, zookeeper.port)
        wait_log(zombies, "ZooKeeper session lost", timeout=60, broker=CUT - 1)
        later = wire.produce(topic, 0, bytes(batch(1, tag=b"late")), acks=1)
        assert later.error_code == NOT_LEADER_OR_FOLLOWER, later
    finally:
        wire.close()
        zk_proxy.target = (zookeeper.host, zookeeper.port)
    _wait_isr(zombies, topic, 3)  # registered again, then a follower that caught up
    wait_until(lambda: len(producer.acked[0]) > 200, what="writes after the heal")
    producer.stop(150)
    assert not producer.failures, producer.failures[:3]
    read = assert_read_back_once(producer, zombies.bootstrap, frozenset([value]))
    _check_zombie_write(answer, read.count(value))


def test_paused_leader_acknowledges_nothing_when_it_wakes(zombies):
    """SIGSTOP a leader (not the controller) past its session; once the controller has
    moved its leadership, pause the controller too, so that no LeaderAndIsr can reach the
    woken broker: it must stop leading on hearing its session expired, not wait to be
    told (before, it took and acknowledged acks=1 writes the new leader never had)."""
    controller_id, _epoch = _controller(zombies)
    old = next(b for b in (2, 3, 1) if b != controller_id)
    others = [b for b in (1, 2, 3) if b != old]
    topic = _topic(zombies, [old, *others])
    producer = BackgroundProducer(zombies.bootstrap, topic)
    producer.start()
    wire, wire_late = _wire(zombies, old), _wire(zombies, old)
    controller = zombies.broker(controller_id)
    try:
        wait_until(lambda: len(producer.acked[0]) > 50, what="acknowledged writes")
        registration = _broker_epoch(zombies, old)
        zombies.broker(old).pause()
        try:
            wait_until(lambda: _stopped(zombies.broker(old).pid), what="SIGSTOP to take effect")
            # sent while it sleeps: the kernel keeps it, the broker reads it on waking
            zombie = bytes(batch(1, tag=b"zombie"))
            wire.send(0, 9, produce_body(topic, 0, zombie, acks=-1, timeout_ms=20000))
            wait_until(
                lambda: (s := _state(zombies, topic)) and s["leader"] not in (-1, old),
                what="the controller to move the leadership off the paused broker",
            )
            controller.pause()
        finally:
            zombies.broker(old).resume()
        try:
            wait_until(
                lambda: (
                    (e := _zk(zombies).exists(f"/brokers/ids/{old}")) and e.czxid != registration
                ),
                what="the woken broker to register again",
            )
            later = wire_late.produce(topic, 0, bytes(batch(1, tag=b"late")), acks=1)
        finally:
            controller.resume()
        assert later.error_code == NOT_LEADER_OR_FOLLOWER, later
        answer = wire.receive(0, 9).responses[0].partition_responses[0]
        # acknowledged only if its followers, not told yet of the new leader, fetched it
        # before it heard of its lost session: then the new leader has it (checked below)
        assert answer.error_code in (0, NOT_LEADER_OR_FOLLOWER, 7), answer  # 7: timed out
    finally:
        wire.close()
        wire_late.close()
    _wait_isr(zombies, topic, 3)
    wait_until(lambda: len(producer.acked[0]) > 200, what="writes after the pause")
    producer.stop(150)
    assert not producer.failures, producer.failures[:3]
    value = b"zombie0-" + b"x" * 10  # the one record of batch(1, tag=b"zombie")
    read = assert_read_back_once(producer, zombies.bootstrap, frozenset([value]))
    _check_zombie_write(answer, read.count(value))


def _check_zombie_write(answer, copies: int) -> None:
    """A write the old leader acknowledged is read back once (its followers fetched it
    before they heard of the new leader); one it refused, at most once."""
    if answer.error_code == 0:
        assert copies == 1, "the old leader's acknowledged write was lost"
    else:
        assert copies <= 1
