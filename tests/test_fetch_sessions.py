"""Fetch sessions (KIP-227) on a real 3-broker cluster.

- the leader's side on the wire: a full fetch at epoch 0 opens a session; incremental
  fetches name only the partitions whose fetch offset moved and are answered with
  only the partitions that have news; a wrong epoch or an unknown session id gets
  Kafka's error code;
- the followers fetch in sessions: records written with acks=all across a follower
  restart and a leader kill come back intact, at the offsets acknowledged, from the
  replica that leads at the end;
- idle partitions, which the leader passes over in a follower's incremental fetch,
  keep their followers in the ISR past replica.lag.time.max.ms, and then take acks=all
  writes at once;
- a full cache (one slot) keeps the follower's session: consumers' fetches are
  answered without one (session id 0).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from broker.protocol.records import build_batch, decode_records
from tests.metrics_helpers import value as metric_value
from tests.wait_helpers import wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

SETTINGS = {"zookeeper.session.timeout.ms": "2000", "replica.lag.time.max.ms": "2000"}


@pytest.fixture(scope="module")
def three(cluster_factory):
    return cluster_factory(3, **SETTINGS)


def _state(three, topic: str, partition: int) -> dict | None:
    zk = three.zk_client()
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    return json.loads(zk.get(path)[0]) if zk.exists(path) else None


def _topic(three, partitions: int) -> str:
    name = f"fs-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(three.bootstrap)
    created = w.create_topic(name, partitions, {"min.insync.replicas": "2"}, rf=3)
    w.close()
    assert created.error_code == ErrorCode.none
    for p in range(partitions):
        wait_until(lambda p=p: len((_state(three, name, p) or {}).get("isr", [])) == 3, what="ISR")
    return name


def _batch(values: list[bytes]) -> bytes:
    return build_batch([(None, v, [], int(time.time() * 1000)) for v in values])


def _fetch(w: WireClient, session_id: int, epoch: int, parts: dict, forget=()):
    """Fetch v12 as a consumer; ``parts``: {(topic, partition): fetch offset}."""
    topics: dict[str, list] = {}
    for (topic, p), offset in parts.items():
        topics.setdefault(topic, []).append(
            {
                "partition": p,
                "current_leader_epoch": -1,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
        )
    forgotten: dict[str, list] = {}
    for topic, p in forget:
        forgotten.setdefault(topic, []).append(p)
    return w.request(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [
                {"topic": t, "partitions": ps} for t, ps in forgotten.items()
            ],
            "rack_id": "",
        },
    )


def _values(records) -> list[bytes]:
    return [r.value for r in decode_records(bytes(records))] if records else []


def _answered(resp) -> dict:
    return {
        (t.topic, p.partition_index): _values(p.records)
        for t in resp.responses
        for p in t.partitions
    }


def test_incremental_fetches_carry_only_news(three):
    topic = _topic(three, 3)
    leaders = {p: _state(three, topic, p)["leader"] for p in range(3)}
    leader = leaders[0]
    mine = [p for p in range(3) if leaders[p] == leader]
    w = WireClient("127.0.0.1", three.broker(leader).port)
    full = _fetch(w, 0, 0, {(topic, p): 0 for p in mine})
    assert full.error_code == ErrorCode.none and full.session_id != 0
    assert set(_answered(full)) == {(topic, p) for p in mine}  # a full fetch names all
    sid = full.session_id
    assert _answered(_fetch(w, sid, 1, {})) == {}  # nothing new anywhere
    r = w.produce(topic, 0, _batch([b"a", b"b"]), acks=-1)
    assert r.error_code == ErrorCode.none and r.base_offset == 0
    news = _answered(_fetch(w, sid, 2, {}))
    assert news == {(topic, 0): [b"a", b"b"]}  # only the partition written to
    # the fetcher moves its offset; nothing more to say about partition 0 then
    assert _answered(_fetch(w, sid, 3, {(topic, 0): 2})) == {}
    assert _fetch(w, sid, 3, {}).error_code == ErrorCode.invalid_fetch_session_epoch
    unknown = (sid + 1_000_003) % (1 << 31)  # session ids are random: this one is free
    assert _fetch(w, unknown, 1, {}).error_code == ErrorCode.fetch_session_id_not_found
    # a new full fetch opens a new session; epoch -1 is sessionless (session id 0)
    again = _fetch(w, 0, 0, {(topic, 0): 0})
    assert again.session_id not in (0, sid)
    assert _answered(again) == {(topic, 0): [b"a", b"b"]}
    plain = _fetch(w, 0, -1, {(topic, 0): 0})
    assert plain.session_id == 0 and _answered(plain) == {(topic, 0): [b"a", b"b"]}
    w.close()


def _produce_all(three, topic: str, start: int, count: int) -> None:
    """acks=all, one record per request, to whoever leads partition 0 now."""
    i = start
    while i < start + count:
        state = _state(three, topic, 0)
        try:
            w = WireClient("127.0.0.1", three.broker(state["leader"]).port)
            r = w.produce(topic, 0, _batch([b"r%d" % i]), acks=-1)
            w.close()
        except OSError:
            time.sleep(0.2)
            continue
        if r.error_code == ErrorCode.none:
            assert r.base_offset == i, f"record {i} acknowledged at offset {r.base_offset}"
            i += 1
        else:
            time.sleep(0.2)  # a leader change under way: try again


def _read_from_leader(three, topic: str, end: int) -> list[bytes]:
    state = _state(three, topic, 0)
    w = WireClient("127.0.0.1", three.broker(state["leader"]).port)
    out: list[bytes] = []
    while len(out) < end:
        p = w.fetch(topic, 0, len(out))
        assert p.error_code == ErrorCode.none
        records = decode_records(bytes(p.records or b""))
        assert records, f"nothing at offset {len(out)} (HW {p.high_watermark})"
        out += [r.value for r in records]
    w.close()
    return out


def test_follower_sessions_survive_restarts_and_leader_changes(three):
    topic = _topic(three, 1)
    _produce_all(three, topic, 0, 30)
    leader = _state(three, topic, 0)["leader"]
    follower = next(b for b in (1, 2, 3) if b != leader)
    three.broker(follower).kill()  # its session on the leader is now stale
    _produce_all(three, topic, 30, 30)
    three.broker(follower).start()
    wait_until(
        lambda: follower in _state(three, topic, 0)["isr"], what="the follower back in the ISR"
    )
    _produce_all(three, topic, 60, 30)
    three.broker(leader).kill()  # followers open sessions with the new leader
    wait_until(lambda: _state(three, topic, 0)["leader"] not in (leader, -1), what="a new leader")
    _produce_all(three, topic, 90, 30)
    three.broker(leader).start()
    wait_until(
        lambda: len(_state(three, topic, 0)["isr"]) == 3, what="the old leader back in the ISR"
    )
    _produce_all(three, topic, 120, 10)
    assert _read_from_leader(three, topic, 130) == [b"r%d" % i for i in range(130)]


def test_idle_partitions_keep_their_followers_in_the_isr(three):
    topic = _topic(three, 4)
    time.sleep(3 * 2.0)  # not a bound: three times replica.lag.time.max.ms, nothing written
    for p in range(4):
        state = _state(three, topic, p)
        assert sorted(state["isr"]) == [1, 2, 3], f"partition {p} shrank to {state['isr']}"
        leader = WireClient("127.0.0.1", three.broker(state["leader"]).port)
        r = leader.produce(topic, p, _batch([b"after-idle"]), acks=-1)
        assert (r.error_code, r.base_offset) == (ErrorCode.none, 0)
        leader.close()


def test_consumers_never_evict_a_followers_session(cluster_factory):
    """One session slot per broker, taken by the follower's session on the leader:
    consumers' full fetches are answered (records and all) without a session, and
    the follower keeps its session and the ISR (Kafka's privileged sessions; an LRU
    cache would hand the slot to each newcomer)."""
    two = cluster_factory(
        2, **SETTINGS, max_incremental_fetch_session_cache_slots=1, **{"quill.metrics.port": "free"}
    )
    name = f"fs-slot-{uuid.uuid4().hex[:6]}"
    w = WireClient.for_bootstrap(two.bootstrap)
    assert w.create_topic(name, 1, {"min.insync.replicas": "2"}, rf=2).error_code == 0
    w.close()
    wait_until(lambda: len((_state(two, name, 0) or {}).get("isr", [])) == 2, what="ISR")
    leader = WireClient("127.0.0.1", two.broker(_state(two, name, 0)["leader"]).port)
    try:
        assert leader.produce(name, 0, _batch([b"a", b"b"]), acks=-1).error_code == 0
        for round_ in range(5):  # the follower fetched: its session holds the only slot
            resp = _fetch(leader, 0, 0, {(name, 0): 0})
            assert (resp.error_code, resp.session_id) == (ErrorCode.none, 0)
            assert _answered(resp)[(name, 0)][:2] == [b"a", b"b"]
            r = leader.produce(name, 0, _batch([b"c%d" % round_]), acks=-1)
            assert (r.error_code, r.base_offset) == (ErrorCode.none, 2 + round_)
        assert sorted(_state(two, name, 0)["isr"]) == [1, 2]
    finally:
        leader.close()
    port = two.broker(_state(two, name, 0)["leader"]).metrics_port
    cache = "kafka_server_fetchsessioncache_"
    assert metric_value(port, cache + "numincrementalfetchsessions") == 1
    assert metric_value(port, cache + "numincrementalfetchpartitionscached") == 1
    assert metric_value(port, cache + "incrementalfetchsessionevictions_total") == 0
