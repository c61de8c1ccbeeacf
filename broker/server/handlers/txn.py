"""Transactions on the wire (KIP-98): InitProducerId for a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit for clients;
WriteTxnMarkers between brokers (the coordinator to each partition's leader).

``__transaction_state`` is created on the first FindCoordinator for a transactional
id (handlers/group.py), as ``__consumer_offsets`` is for groups.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ...client.connection import BrokerConnection
from ...coordinator.group import OFFSETS_TOPIC
from ...coordinator.transaction import TxnState
from ...coordinator.transaction.metadata import STATE_NAMES
from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader, ms
from .group_offsets import _by_topic, _known, offsets_of_request

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)
E = ErrorCode
MARKER_TIMEOUT_S = 5.0


def _fenced(code: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for clients older than KIP-588."""
    if code == E.producer_fenced and version < first_fenced_version:
        return E.invalid_producer_epoch
    return code


# -- InitProducerId ------------------------------------------------------------------------
async def init_transactional_producer_id(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    error, pid, epoch = await server.txn_coordinator.init_producer_id(
        req.transactional_id,
        ms(req.transaction_timeout),
        getattr(req, "producer_id", -1),
        getattr(req, "producer_epoch", -1),
    )
    return {
        "error_code": _fenced(error, header.api_version, 4),
        "producer_id": pid,
        "producer_epoch": epoch,
        "throttle_time": 0,
    }


# -- AddPartitionsToTxn / AddOffsetsToTxn / EndTxn -----------------------------------------
async def handle_add_partitions_to_txn(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if not _known(server, *tp)}
    if unknown:  # Kafka: UNKNOWN_TOPIC_OR_PARTITION there, OPERATION_NOT_ATTEMPTED elsewhere
        errors = {
            tp: E.unknown_topic_or_partition if tp in unknown else E.operation_not_attempted
            for tp in wanted
        }
    else:
        error = await server.txn_coordinator.add_partitions(
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            wanted,
        )
        errors = dict.fromkeys(wanted, _fenced(error, header.api_version, 2))
    results: dict[str, list] = {}
    for (topic, p), err in errors.items():
        results.setdefault(topic, []).append({"partition_index": p, "partition_error_code": err})
    return {
        "throttle_time": 0,
        "results_by_topic_v3_and_below": [
            {"name": name, "results_by_partition": parts} for name, parts in results.items()
        ],
    }


async def handle_add_offsets_to_txn(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    partition = server.group_coordinator.manager.partition_for(req.group_id)
    error = await server.txn_coordinator.add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch, [(OFFSETS_TOPIC, partition)]
    )
    return {"throttle_time": 0, "error_code": _fenced(error, header.api_version, 2)}


async def handle_end_txn(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    error = await server.txn_coordinator.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed
    )
    return {"throttle_time": 0, "error_code": _fenced(error, header.api_version, 2)}


# -- DescribeTransactions / ListTransactions (KIP-664) -------------------------------------
async def handle_describe_transactions(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    manager = server.txn_coordinator.manager
    states = []
    for txn_id in req.transactional_ids:
        error = manager.status(txn_id)
        md = manager.txns.get(txn_id) if error == E.none else None
        if error == E.none and (md is None or md.state == TxnState.DEAD):
            error = E.transactional_id_not_found
        entry = {"error_code": error, "transactional_id": txn_id, "transaction_state": ""}
        entry.update(producer_id=-1, producer_epoch=-1, transaction_start_time=-1, topics=[])
        if md is not None and error == E.none:
            topics: dict[str, list[int]] = {}
            for t, p in sorted(md.partitions):
                topics.setdefault(t, []).append(p)
            entry.update(
                transaction_state=STATE_NAMES[md.state],
                transaction_timeout=md.timeout_ms,
                transaction_start_time=md.start_ms,
                producer_id=md.producer_id,
                producer_epoch=md.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in topics.items()],
            )
        states.append(entry)
    return {"throttle_time": 0, "transaction_states": states}


async def handle_list_transactions(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    """The transactional ids this broker coordinates (an admin client asks every broker)."""
    manager = server.txn_coordinator.manager
    known = set(STATE_NAMES.values())
    wanted = set(req.state_filters or ())
    pids = set(req.producer_id_filters or ())
    error = E.coordinator_load_in_progress if manager.is_loading else E.none
    states = [
        {
            "transactional_id": md.transactional_id,
            "producer_id": md.producer_id,
            "transaction_state": STATE_NAMES[md.state],
        }
        for md in list(manager.txns.values())
        if (not wanted or STATE_NAMES[md.state] in wanted)
        and (not pids or md.producer_id in pids)
        and md.state != TxnState.DEAD
    ]
    return {
        "throttle_time": 0,
        "error_code": error,
        "unknown_state_filters": sorted(wanted - known),
        "transaction_states": states,
    }


# -- TxnOffsetCommit -----------------------------------------------------------------------
async def handle_txn_offset_commit(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    errors, offsets, order = offsets_of_request(server, req.topics)
    if offsets:
        result = await server.group_coordinator.admin.commit_txn_offsets(
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            getattr(req, "member_id", ""),
            getattr(req, "group_instance_id", None),
            getattr(req, "generation_id", -1),
            offsets,
        )
        errors.update({tp: _fenced(e, header.api_version, 3) for tp, e in result.items()})
    return {"throttle_time": 0, "topics": _by_topic(errors, order)}


# -- WriteTxnMarkers -----------------------------------------------------------------------
async def write_markers_locally(
    server: KafkaServer, pid: int, epoch: int, commit: bool, coordinator_epoch: int, tps
) -> dict[tuple[str, int], ErrorCode]:
    """Append the marker to each partition we lead and wait for the ISR (acks=all);
    markers on ``__consumer_offsets`` complete the group's pending offsets."""
    results: dict[tuple[str, int], ErrorCode] = {}
    waits = []
    for topic, p in tps:
        r = server.replicas.append_marker(topic, p, pid, epoch, coordinator_epoch, commit)
        results[(topic, p)] = r.error
        if r.error == E.none:
            waits.append(((topic, p), r.last_offset))
    done = await asyncio.gather(
        *(server.replicas.wait_committed(t, p, off, MARKER_TIMEOUT_S) for (t, p), off in waits)
    )
    for ((topic, p), _off), ok in zip(waits, done, strict=True):
        if not ok:
            results[(topic, p)] = E.request_timed_out
        elif topic == OFFSETS_TOPIC:
            server.group_coordinator.manager.complete_txn(p, pid, commit)
    return results


async def handle_write_txn_markers(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    markers = []
    for m in req.markers:
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        errors = await write_markers_locally(
            server,
            m.producer_id,
            m.producer_epoch,
            m.transaction_result,
            m.coordinator_epoch,
            tps,
        )
        markers.append({"producer_id": m.producer_id, "topics": _by_topic(errors, tps)})
    return {"markers": markers}


class TransactionMarkerChannel:
    """The coordinator's way to the partition leaders (Kafka's
    TransactionMarkerChannelManager): a connection per broker, kept open."""

    def __init__(self, server: KafkaServer) -> None:
        self.server = server
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def send(self, leader: int, pid: int, epoch: int, commit: bool, coord_epoch: int, tps):
        server = self.server
        if leader == server.config.broker_id:
            return await write_markers_locally(server, pid, epoch, commit, coord_epoch, tps)
        conn = await self._connection(leader)
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        body = {
            "markers": [
                {
                    "producer_id": pid,
                    "producer_epoch": epoch,
                    "transaction_result": commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                    "coordinator_epoch": coord_epoch,
                }
            ]
        }
        try:
            resp = await conn.request(27, 1, body, timeout_s=MARKER_TIMEOUT_S * 2)
        except Exception:
            self._conns.pop(leader, None)
            await conn.close()
            raise
        out = {}
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = ErrorCode(p.error_code)
        return out

    async def _connection(self, broker_id: int) -> BrokerConnection:
        async with self._connecting.setdefault(broker_id, asyncio.Lock()):
            conn = self._conns.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            endpoint = self.server.broker_endpoint(broker_id)
            if endpoint is None:
                raise OSError(f"broker {broker_id} is not alive")
            client_id = f"broker-{self.server.config.broker_id}-txn"
            conn = BrokerConnection(
                *endpoint, client_id=client_id, security=self.server.inter_broker_security
            )
            await conn.connect()
            self._conns[broker_id] = conn
            return conn

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.close()
        self._conns.clear()
