"""Requests sent to one chosen broker over the Kafka protocol.

librdkafka routes ListOffsets to leaders and has no DescribeLogDirs, and the console
needs both per broker: the log-end offsets each leader reports and the size of every
replica on every broker. A BrokerSocket is a plain blocking socket speaking frames made
by broker.protocol.messages (pure codecs over kio); one per broker, reused, reopened
after an error; through TLS and SASL when the environment's client config asks
(cluster_client.client_socket).

The monitor asks each broker for the offsets of every partition every second, so a
request is a `Call`: its frame is encoded once and kept (only the correlation id
changes between rounds), and a broker's calls of one round are pipelined: all sent,
then all read.
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from broker.protocol.framing import FrameDecoder
from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from cluster_client import client_socket, clusters

LIST_OFFSETS, DESCRIBE_LOG_DIRS = 2, 35
LIST_OFFSETS_V, DESCRIBE_LOG_DIRS_V = 7, 4
EARLIEST, LATEST = -2, -1
CONSUMER, DEBUGGING = -1, -2  # Kafka's replica ids: a consumer, an operator's debug tool
TIMEOUT_S = 5.0
_INT32 = struct.Struct(">i")
_CORRELATION_AT = 8  # size i32, api key i16, api version i16, correlation id i32
FRAME_CACHE_SIZE = 64


@dataclass(frozen=True)
class Call:
    """One request, encoded, and how to read its answer."""

    api_key: int
    version: int
    frame: bytes  # size-prefixed, correlation id 0
    decode: Callable[[Any], Any]


_frames: OrderedDict[tuple, bytes] = OrderedDict()
_frames_lock = threading.Lock()


def _frame(api_key: int, version: int, key: tuple, make_body: Callable[[], dict]) -> bytes:
    """The encoded request for `key`, built by `make_body` only the first time."""
    with _frames_lock:
        frame = _frames.get(key)
        if frame is not None:
            _frames.move_to_end(key)
            return frame
    frame = encode_request(
        RequestHeader(api_key, version, 0, "quill-console"),
        build(request_schema(api_key, version), make_body()),
    )
    with _frames_lock:
        _frames[key] = frame
        while len(_frames) > FRAME_CACHE_SIZE:
            _frames.popitem(last=False)
    return frame


def request_call(api_key: int, version: int, body: dict, client_id: str = "quill-console") -> Call:
    """Any request, encoded now (not cached); its answer is kio's raw response."""
    header = RequestHeader(api_key, version, 0, client_id)
    frame = encode_request(header, build(request_schema(api_key, version), body))
    return Call(api_key, version, frame, None)


class BrokerSocket:
    def __init__(self, host: str, port: int, conf=None):
        self.address = (host, int(port))
        self.conf = conf  # client properties (None: the environment's)
        self.sock: socket.socket | None = None
        self.renew_at: float | None = None  # its SASL session ends soon after (KIP-368)
        self.lock = threading.Lock()
        self.ids = itertools.count(1)

    def _read_frame(self) -> bytes:
        """The next answer's frame, through protocol.framing (no byte read past it)."""
        try:
            return FrameDecoder().pull(self.sock.recv)
        except EOFError:
            raise ConnectionError(f"broker {self.address} closed the connection") from None

    def pipeline(self, calls: list[Call]) -> list[Any]:
        """Send every call, then read every answer (in order, as Kafka guarantees per
        connection); each answer decoded by its call (raw response without one)."""
        with self.lock:
            try:
                if self.renew_at is not None and time.monotonic() >= self.renew_at:
                    self.close()  # a new socket, a new session: the broker ends the old one
                if self.sock is None:
                    self.sock, self.renew_at = client_socket.open_session(
                        self.address, TIMEOUT_S, self.conf
                    )
                ids = []
                for call in calls:
                    frame = bytearray(call.frame)
                    ids.append(next(self.ids) & 0x7FFFFFFF)
                    _INT32.pack_into(frame, _CORRELATION_AT, ids[-1])
                    self.sock.sendall(frame)
                answers = []
                for call, cid in zip(calls, ids, strict=True):
                    got, response = parse_response(call.api_key, call.version, self._read_frame())
                    if got != cid:
                        raise ConnectionError(f"correlation id {got} is not {cid}")
                    answers.append(response if call.decode is None else call.decode(response))
                return answers
            except (OSError, ValueError):
                self.close()
                raise

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.renew_at = None


_sockets: dict[tuple[str, str, int], BrokerSocket] = {}  # (cluster, host, port)
_sockets_lock = threading.Lock()
_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="quill-wire")


def broker_socket(host: str, port: int) -> BrokerSocket:
    cluster = clusters.current()
    with _sockets_lock:
        key = (cluster.name, host, int(port))
        if key not in _sockets:
            _sockets[key] = BrokerSocket(host, port, cluster.client_properties)
        return _sockets[key]


def list_offsets_call(wanted: dict[tuple[str, int], int], replica_id: int = CONSUMER) -> Call:
    """ListOffsets for (topic, partition) -> timestamp (EARLIEST, LATEST or ms); the answer
    maps each to its offset, None where the broker answered an error (not the leader,
    unknown partition)."""

    def body() -> dict:
        by_topic: dict[str, list[dict]] = {}
        for (t, p), ts in wanted.items():
            by_topic.setdefault(t, []).append(
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
            )
        return {
            "replica_id": replica_id,
            "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }

    key = (LIST_OFFSETS, replica_id, tuple(wanted.items()))
    frame = _frame(LIST_OFFSETS, LIST_OFFSETS_V, key, body)
    return Call(LIST_OFFSETS, LIST_OFFSETS_V, frame, _offsets_answer)


def _offsets_answer(response) -> dict[tuple[str, int], int | None]:
    out = {}
    for t in response.topics:
        name = t.name
        for p in t.partitions:
            out[(name, p.partition_index)] = None if p.error_code != 0 else p.offset
    return out


def list_offsets(
    host: str, port: int, wanted: dict[tuple[str, int], int], replica_id: int = CONSUMER
) -> dict[tuple[str, int], int | None]:
    return broker_socket(host, port).pipeline([list_offsets_call(wanted, replica_id)])[0]


def describe_log_dirs_call(parts: list[tuple[str, int]] | None = None) -> Call:
    """DescribeLogDirs for every replica on the broker, or only `parts`. The answer:
    {"dirs": [{dir, total_bytes, usable_bytes}], "replicas": {(t, p): {size, offset_lag}}}."""

    def body() -> dict:
        if parts is None:
            return {"topics": None}
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            by_topic.setdefault(t, []).append(p)
        return {"topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    key = (DESCRIBE_LOG_DIRS, None if parts is None else tuple(parts))
    frame = _frame(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_V, key, body)
    return Call(DESCRIBE_LOG_DIRS, DESCRIBE_LOG_DIRS_V, frame, _log_dirs_answer)


def _log_dirs_answer(response) -> dict:
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


def describe_log_dirs(host: str, port: int, parts: list[tuple[str, int]] | None = None) -> dict:
    return broker_socket(host, port).pipeline([describe_log_dirs_call(parts)])[0]


def on_each(calls: dict, fn, *args) -> dict:
    """Run fn(host, port, *per_call_args) for every broker at once.
    `calls` maps a key to (host, port, extra args tuple); the result maps the key to the
    answer or to the exception raised."""
    run = clusters.in_context(fn)  # the pool's threads work on the caller's cluster
    futures = {key: _pool.submit(run, h, p, *extra, *args) for key, (h, p, extra) in calls.items()}
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(timeout=TIMEOUT_S * 2)
        except Exception as exc:  # noqa: BLE001 - one broker's failure is reported, not raised
            out[key] = exc
    return out


# ---------------------------------------------------------------- configs of any level

INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_V = 44, 1
SET, DELETE = 0, 1  # Kafka's AlterConfigOp types


def incremental_alter_configs(
    host: str, port: int, resource: tuple[int, str], set_: dict, delete: list, validate_only: bool
) -> tuple[int, str, str | None]:
    """IncrementalAlterConfigs of one resource, (type, name), on this broker. librdkafka
    refuses the empty name of the cluster-wide broker default (/config/brokers/<default>),
    so that level goes out here. Returns (error code, its name, the broker's message)."""
    ops = [{"name": k, "config_operation": SET, "value": v} for k, v in set_.items()]
    ops += [{"name": k, "config_operation": DELETE, "value": None} for k in delete]
    body = {
        "resources": [{"resource_type": resource[0], "resource_name": resource[1], "configs": ops}],
        "validate_only": validate_only,
    }
    version = INCREMENTAL_ALTER_CONFIGS_V
    frame = encode_request(
        RequestHeader(INCREMENTAL_ALTER_CONFIGS, version, 0, "quill-console"),
        build(request_schema(INCREMENTAL_ALTER_CONFIGS, version), body),
    )
    call = Call(INCREMENTAL_ALTER_CONFIGS, version, frame, None)
    (answer,) = broker_socket(host, port).pipeline([call])
    result = answer.responses[0]
    code = int(result.error_code)
    return code, getattr(result.error_code, "name", str(code)).upper(), result.error_message
