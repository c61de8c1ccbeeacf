"""Requests sent to one chosen broker over the Kafka protocol.

librdkafka routes ListOffsets to leaders and has no DescribeLogDirs, and the console
needs both per broker: the log-end offsets each leader reports and the size of every
replica on every broker. A BrokerSocket is a plain blocking socket speaking frames made
by broker.protocol.messages (pure codecs over kio); one per broker, reused, reopened
after an error.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)

LIST_OFFSETS, DESCRIBE_LOG_DIRS = 2, 35
LIST_OFFSETS_V, DESCRIBE_LOG_DIRS_V = 7, 4
EARLIEST, LATEST = -2, -1
CONSUMER, DEBUGGING = -1, -2  # Kafka's replica ids: a consumer, an operator's debug tool
TIMEOUT_S = 5.0
_SIZE = struct.Struct(">i")


class BrokerSocket:
    def __init__(self, host: str, port: int):
        self.address = (host, int(port))
        self.sock: socket.socket | None = None
        self.lock = threading.Lock()
        self.ids = itertools.count(1)

    def _recv(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError(f"broker {self.address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, body: dict) -> Any:
        with self.lock:
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(self.address, timeout=TIMEOUT_S)
                cid = next(self.ids)
                payload = build(request_schema(api_key, version), body)
                header = RequestHeader(api_key, version, cid, "quill-console")
                self.sock.sendall(encode_request(header, payload))
                size = _SIZE.unpack(self._recv(4))[0]
                got, response = parse_response(api_key, version, self._recv(size))
                if got != cid:
                    raise ConnectionError(f"correlation id {got} is not {cid}")
                return response
            except (OSError, ValueError):
                self.close()
                raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


_sockets: dict[tuple[str, int], BrokerSocket] = {}
_sockets_lock = threading.Lock()
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="quill-wire")


def broker_socket(host: str, port: int) -> BrokerSocket:
    with _sockets_lock:
        key = (host, int(port))
        if key not in _sockets:
            _sockets[key] = BrokerSocket(host, port)
        return _sockets[key]


def list_offsets(
    host: str, port: int, wanted: dict[tuple[str, int], int], replica_id: int = CONSUMER
) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> offset for the given timestamp (EARLIEST, LATEST or ms);
    None where the broker answered an error (not the leader, unknown partition)."""
    by_topic: dict[str, list[dict]] = {}
    for (t, p), ts in wanted.items():
        by_topic.setdefault(t, []).append(
            {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
        )
    body = {
        "replica_id": replica_id,
        "isolation_level": 0,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    response = broker_socket(host, port).request(LIST_OFFSETS, LIST_OFFSETS_V, body)
    out = {}
    for t in response.topics:
        for p in t.partitions:
            out[(t.name, p.partition_index)] = None if p.error_code != 0 else p.offset
    return out


def describe_log_dirs(host: str, port: int, parts: list[tuple[str, int]] | None = None) -> dict:
    """{"dirs": [{dir, total_bytes, usable_bytes}], "replicas": {(t, p): {size, offset_lag}}},
    for every replica on the broker or only `parts`."""
    topics = None
    if parts is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        topics = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
    response = broker_socket(host, port).request(
        DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_V, {"topics": topics}
    )
    dirs, replicas = [], {}
    for result in response.results:
        dirs.append(
            {
                "dir": result.log_dir,
                "total_bytes": result.total_bytes,
                "usable_bytes": result.usable_bytes,
            }
        )
        for t in result.topics:
            for p in t.partitions:
                replicas[(t.name, p.partition_index)] = {
                    "size": p.partition_size,
                    "offset_lag": p.offset_lag,
                }
    return {"dirs": dirs, "replicas": replicas}


def on_each(calls: dict, fn, *args) -> dict:
    """Run fn(host, port, *per_call_args) for every broker at once.
    `calls` maps a key to (host, port, extra args tuple); the result maps the key to the
    answer or to the exception raised."""
    futures = {key: _pool.submit(fn, h, p, *extra, *args) for key, (h, p, extra) in calls.items()}
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(timeout=TIMEOUT_S * 2)
        except Exception as exc:  # noqa: BLE001 - one broker's failure is reported, not raised
            out[key] = exc
    return out
