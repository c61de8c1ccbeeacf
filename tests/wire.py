"""A tiny raw Kafka client for tests: exact requests, exact bytes, exact error codes."""

from __future__ import annotations

import socket
import struct

from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)


class WireClient:
    def __init__(
        self,
        host: str,
        port: int,
        timeout: float = 10.0,
        client_id: str = "wire-test",
        source_host: str | None = None,
    ) -> None:
        """``source_host``: connect from that local address (e.g. 127.0.0.2, to be
        another client host for ACL host matching)."""
        source = (source_host, 0) if source_host else None
        self.sock = socket.create_connection((host, port), timeout=timeout, source_address=source)
        self.correlation = 0
        self.client_id = client_id

    @classmethod
    def for_bootstrap(cls, bootstrap: str, source_host: str | None = None) -> WireClient:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        return cls(host, int(port), source_host=source_host)

    def close(self) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            out += chunk
        return bytes(out)

    def request(self, api_key: int, version: int, body: dict):
        frame = self.request_frame(api_key, version, body)
        corr, resp = parse_response(api_key, version, frame)
        assert corr == self.correlation
        return resp

    def request_frame(self, api_key: int, version: int, body: dict) -> bytes:
        """The response frame (without its size) to a request, unparsed: for the versions
        whose responses we encode by hand (Produce v0-v2, Fetch v0-v3)."""
        self.send(api_key, version, body)
        return self.read_frame()

    def send(self, api_key: int, version: int, body: dict) -> None:
        """Send a request without waiting for its answer (``receive`` reads it): to a
        broker that is paused, say."""
        self.correlation += 1
        req = build(request_schema(api_key, version), body)
        self.send_raw(
            encode_request(RequestHeader(api_key, version, self.correlation, self.client_id), req)
        )

    def receive(self, api_key: int, version: int):
        """The answer to the last request ``send`` sent."""
        corr, resp = parse_response(api_key, version, self.read_frame())
        assert corr == self.correlation
        return resp

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    # -- conveniences ----------------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: bytes, acks: int = 1, version: int = 9):
        resp = self.request(0, version, produce_body(topic, partition, records, acks))
        return resp.responses[0].partition_responses[0]

    def list_offset(self, topic: str, partition: int, timestamp: int, replica_id: int = -1):
        """-1 asks as a consumer (latest = HW); -2 as Kafka's debugging tool (latest = this
        broker's own log end offset, leader or follower)."""
        resp = self.request(
            2,
            7,
            {
                "replica_id": replica_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": partition,
                                "current_leader_epoch": -1,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
        return resp.topics[0].partitions[0]

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict | None = None, rf: int = 1
    ):
        resp = self.request(
            19,
            7,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": partitions,
                        "replication_factor": rf,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                    }
                ],
                "timeout": 10000,
                "validate_only": False,
            },
        )
        return resp.topics[0]

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_wait: int = 0,
        rack_id: str = "",
        version: int = 12,
    ):
        resp = self.fetch_request(
            [(topic, partition, offset)], max_bytes, max_wait, rack_id=rack_id, version=version
        )
        return resp.responses[0].partitions[0]

    def fetch_request(
        self,
        parts: list[tuple[str, int, int]],
        max_bytes: int = 1 << 20,
        max_wait: int = 0,
        session_id: int = 0,
        session_epoch: int = -1,
        rack_id: str = "",
        version: int = 12,
    ):
        """Fetch (v12 unless told) as a consumer of ``parts`` [(topic, partition, fetch
        offset)]; the whole response (sessions: KIP-227's session id and epoch; rack_id:
        the consumer's client.rack, KIP-392, v11+)."""
        topics: dict[str, list] = {}
        for topic, partition, offset in parts:
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": -1,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": max_bytes,
                }
            )
        return self.request(
            1,
            version,
            {
                "replica_id": -1,
                "max_wait": max_wait,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": session_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [],
                "rack_id": rack_id,
            },
        )


def produce_body(
    topic: str, partition: int, records: bytes, acks: int = 1, timeout_ms: int = 5000
) -> dict:
    """A Produce request's body: ``records`` to one partition."""
    return {
        "acks": acks,
        "timeout": timeout_ms,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
