"""Transaction requests on the wire: Kafka's error codes for a wrong epoch, an unknown
producer id, an EndTxn without a transaction, a timeout above
transaction.max.timeout.ms, a marker for an unknown partition; and the expiry of an
idle transactional id."""

from __future__ import annotations

import struct
import time

import pytest
from kio.schema.errors import ErrorCode as E

from broker.protocol.messages import RequestHeader, build, encode_request, request_schema
from tests.group_helpers import create_topic, unique
from tests.txn_helpers import TXN_BROKER, init_pid, wait_txn_coordinator
from tests.wire import WireClient


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(1, **TXN_BROKER, **{"transaction.max.timeout.ms": "120000"})


@pytest.fixture
def client(cluster):
    c = WireClient.for_bootstrap(cluster.bootstrap)
    yield c
    c.close()


def _add(client, txn_id, pid, epoch, topic, version=3):
    resp = client.request(
        24,
        version,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
    )
    (t,) = resp.results_by_topic_v3_and_below
    (p,) = t.results_by_partition
    return p.partition_error_code


def _end(client, txn_id, pid, epoch, commit=True, version=3):
    return client.request(
        26,
        version,
        {
            "transactional_id": txn_id,
            "producer_id": pid,
            "producer_epoch": epoch,
            "committed": commit,
        },
    ).error_code


def test_coordinator_is_found_and_gives_a_producer_id(cluster, client):
    txn_id = unique("tx")
    found = wait_txn_coordinator(client, txn_id)
    assert found.error_code == E.none and found.node_id == 1
    first = init_pid(client, txn_id)
    assert first.error_code == E.none and first.producer_id >= 0 and first.producer_epoch == 0
    again = init_pid(client, txn_id)  # a restart of the same producer: epoch bump
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)


def test_timeout_above_the_maximum_is_refused(cluster, client):
    txn_id = unique("tx")
    wait_txn_coordinator(client, txn_id)
    assert init_pid(client, txn_id, timeout_ms=120001).error_code == E.invalid_transaction_timeout
    assert init_pid(client, txn_id, timeout_ms=0).error_code == E.invalid_transaction_timeout


def test_unknown_producer_id_and_wrong_epoch(cluster, client):
    topic = unique("t-wire")
    create_topic(cluster.bootstrap, topic, 1)
    txn_id = unique("tx")
    wait_txn_coordinator(client, txn_id)
    assert _add(client, txn_id, 12345, 0, topic) == E.invalid_producer_id_mapping
    got = init_pid(client, txn_id)
    pid, epoch = got.producer_id, got.producer_epoch
    assert _add(client, txn_id, pid + 1, epoch, topic) == E.invalid_producer_id_mapping
    assert _add(client, txn_id, pid, epoch + 1, topic) == E.producer_fenced
    assert _add(client, txn_id, pid, epoch + 1, topic, version=1) == E.invalid_producer_epoch
    assert _end(client, txn_id, pid, epoch) == E.invalid_txn_state  # nothing begun
    assert _add(client, txn_id, pid, epoch, "no-such-topic") == E.unknown_topic_or_partition
    assert _add(client, txn_id, pid, epoch, topic) == E.none
    assert _end(client, txn_id, pid, epoch - 1) == E.producer_fenced
    assert _end(client, txn_id, pid, epoch - 1, version=1) == E.invalid_producer_epoch
    assert _end(client, "never-initialised", pid, epoch) in (
        E.invalid_producer_id_mapping,
        E.coordinator_load_in_progress,
    )
    assert _end(client, txn_id, pid, epoch, commit=True) == E.none
    # a retried EndTxn that already went through is fine; the opposite outcome is not
    wait_ok = [_end(client, txn_id, pid, epoch, commit=True) for _ in range(50)]
    assert E.none in wait_ok
    assert _end(client, txn_id, pid, epoch, commit=False) == E.invalid_txn_state


def test_write_txn_markers_for_an_unknown_partition(cluster, client):
    resp = client.request(
        27,
        1,
        {
            "markers": [
                {
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "transaction_result": True,
                    "topics": [{"name": "no-such-topic", "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
    )
    (marker,) = resp.markers
    assert marker.topics[0].partitions[0].error_code == E.unknown_topic_or_partition


def test_idle_transactional_id_expires(cluster_factory):
    """transactional.id.expiration.ms: an idle id gets a tombstone; InitProducerId for
    it again starts over with a new producer id."""
    expiring = cluster_factory(
        1,
        **TXN_BROKER,
        **{
            "transactional.id.expiration.ms": "1000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "300",
        },
    )
    client = WireClient.for_bootstrap(expiring.bootstrap)
    try:
        txn_id = unique("tx")
        wait_txn_coordinator(client, txn_id)
        first = init_pid(client, txn_id)
        assert first.error_code == E.none
        deadline = time.monotonic() + 30
        while True:
            again = init_pid(client, txn_id)
            assert again.error_code == E.none
            if again.producer_id != first.producer_id or time.monotonic() > deadline:
                break
            time.sleep(1.5)  # each InitProducerId is activity: wait past the expiry
        assert again.producer_id != first.producer_id and again.producer_epoch == 0
    finally:
        client.close()


def test_describe_and_list_transactions(cluster, client):
    topic = unique("t-describe")
    create_topic(cluster.bootstrap, topic, 2)
    txn_id = unique("tx")
    wait_txn_coordinator(client, txn_id)
    got = init_pid(client, txn_id, timeout_ms=45000)
    pid, epoch = got.producer_id, got.producer_epoch
    resp = client.request(
        24,
        3,
        {
            "v3_and_below_transactional_id": txn_id,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [1, 0]}],
        },
    )
    assert resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    described = client.request(65, 0, {"transactional_ids": [txn_id]})
    (ours,) = described.transaction_states
    assert ours.error_code == E.none and ours.transaction_state == "Ongoing"
    assert (ours.producer_id, ours.producer_epoch) == (pid, epoch)
    assert ours.transaction_timeout.total_seconds() == 45
    assert [(t.topic, list(t.partitions)) for t in ours.topics] == [(topic, [0, 1])]
    assert _describe_error(client, "never-seen") in (
        E.transactional_id_not_found,
        E.not_coordinator,
    )
    listed = client.request(66, 0, {"state_filters": ["Ongoing", "Bogus"]})
    assert listed.error_code == E.none and list(listed.unknown_state_filters) == ["Bogus"]
    assert (txn_id, pid, "Ongoing") in {
        (s.transactional_id, s.producer_id, s.transaction_state) for s in listed.transaction_states
    }
    assert _end(client, txn_id, pid, epoch, commit=False) == E.none
    by_pid = client.request(66, 0, {"producer_id_filters": [pid]})
    assert [s.transactional_id for s in by_pid.transaction_states] == [txn_id]


def _describe_error(client, txn_id: str) -> int:
    """The error code of one DescribeTransactions answer, read from the bytes: kio will
    not parse the -1 start time Kafka sends for an id without a transaction."""
    client.correlation += 1
    body = build(request_schema(65, 0), {"transactional_ids": [txn_id]})
    client.send_raw(encode_request(RequestHeader(65, 0, client.correlation, "wire"), body))
    frame = client.read_frame()
    # correlation id, header tags, throttle time, compact array length (one entry)
    assert struct.unpack_from(">i", frame, 0)[0] == client.correlation and frame[9] == 2
    return struct.unpack_from(">h", frame, 10)[0]


def test_init_producer_id_with_the_current_epoch_bumps_once(cluster, client):
    """KIP-360: a producer names its id and epoch; a retry of that request (its answer
    lost) gets the same bumped epoch, an older epoch is fenced."""
    txn_id = unique("tx")
    wait_txn_coordinator(client, txn_id)
    first = init_pid(client, txn_id)
    pid, epoch = first.producer_id, first.producer_epoch

    def init_with(e: int):
        return client.request(
            22,
            4,
            {
                "transactional_id": txn_id,
                "transaction_timeout": 60000,
                "producer_id": pid,
                "producer_epoch": e,
            },
        )

    bumped = init_with(epoch)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, pid, epoch + 1)
    retried = init_with(epoch)
    assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
        0,
        pid,
        epoch + 1,
    )
    again = init_with(epoch + 1)
    assert again.producer_epoch == epoch + 2
    assert init_with(epoch).error_code == E.producer_fenced
