"""The floor (issue 24): what answering a 1-record produce request costs at the least.

    python bench/floor.py [--seconds 10] [--connections 8] [--loops asyncio,uvloop]

A minimal asyncio server (an ``asyncio.Protocol``, no broker code on its path) reads
4-byte length-prefixed frames, looks only at the request header (api_key, api_version,
correlation_id) and answers with responses built once at start with Quill's own
encoders (kio underneath): ApiVersions (Produce, Metadata, ApiVersions at the versions
Quill's broker supports), Metadata (one broker, itself; topic ``one`` with one partition,
it the leader) and Produce (NO_ERROR, base offsets counting up). Per request it patches
the correlation id (and Produce's base offset) into a copy of the canned bytes.

Rows, each with the CPU model: the same client as bench/acks_all.py's requests/s row
(``--connections`` producer processes, one connection each, batch.num.messages=1,
linger.ms=0, acks=1, 100-byte records, as fast as they go for ``--seconds``) against
the floor server on the stdlib loop, on uvloop, and against one real Quill broker (topic
``one``, 1 partition, RF 1); requests/s and the server's CPU per request (utime + stime
from /proc, bench/machine_cpu.py), and Quill as a ratio of each floor. One partition:
the canned Produce response names partition 0, which is where every record goes.

``--serve PORT`` runs only the floor server (``--loop``), for a client of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import machine_cpu  # noqa: E402

TOPIC = "one"
API_VERSIONS, METADATA, PRODUCE = 18, 3, 0
_HEAD = struct.Struct(">hhi")
_LEN = struct.Struct(">i")
_OFFSETS = itertools.count()  # one partition: each produce request appends one batch


def split_frames(buf: bytearray) -> list[bytes]:
    """Remove the complete 4-byte length-prefixed frames at the start of ``buf`` and
    return them (without their prefix); a partial frame stays in ``buf``."""
    frames, pos, end = [], 0, len(buf)
    while end - pos >= 4:
        (size,) = _LEN.unpack_from(buf, pos)
        if end - pos - 4 < size:
            break
        frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    del buf[:pos]
    return frames


def canned_responses(port: int, partitions: int = 1) -> dict[tuple[int, int], bytes]:
    """(api_key, version) -> the response frame with correlation id 0, built once."""
    from broker.protocol.messages import build, encode_response, response_schema
    from broker.protocol.produce_response import encode_produce_response
    from broker.server.apis import SUPPORTED

    keys = (API_VERSIONS, METADATA, PRODUCE)
    api_versions = {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": SUPPORTED[k][1], "max_version": SUPPORTED[k][2]}
            for k in keys
        ],
        "throttle_time": 0,
    }
    metadata = {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
        "cluster_id": "floor",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": TOPIC,
                "topic_id": b"\0" * 16,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                    for i in range(partitions)
                ],
            }
        ],
    }
    produce = {
        "responses": [
            {
                "name": TOPIC,
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 0,
                        "log_append_time": -1,
                        "log_start_offset": 0,
                    }
                ],
            }
        ],
        "throttle_time": 0,
    }
    out = {}
    for key, body in ((API_VERSIONS, api_versions), (METADATA, metadata)):
        for v in range(SUPPORTED[key][1], SUPPORTED[key][2] + 1):
            out[(key, v)] = encode_response(key, v, 0, build(response_schema(key, v), body))
    for v in range(SUPPORTED[PRODUCE][1], SUPPORTED[PRODUCE][2] + 1):
        out[(PRODUCE, v)] = encode_produce_response(v, 0, produce)
    return out


def base_offset_at(version: int) -> int:
    """Where Produce's base_offset sits in its canned frame: length, correlation id,
    header tag (v9), topics count, name, partitions count, index, error code."""
    flexible = version >= 9
    name = 1 + len(TOPIC) if flexible else 2 + len(TOPIC)
    counts = 1 if flexible else 4
    return 4 + 4 + (1 if flexible else 0) + counts + name + counts + 4 + 2


class FloorProtocol(asyncio.Protocol):
    def __init__(self, canned: dict) -> None:
        self.canned = canned
        self.buf = bytearray()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out = []
        for frame in split_frames(self.buf):
            api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
            template = self.canned.get((api_key, version))
            if template is None:
                self.transport.close()  # not something a producer sends: close, as Kafka does
                return
            resp = bytearray(template)
            _LEN.pack_into(resp, 4, correlation_id)
            if api_key == PRODUCE:
                struct.pack_into(">q", resp, base_offset_at(version), next(_OFFSETS))
            out.append(resp)
        if out:
            self.transport.write(b"".join(out))


def serve(port: int, loop_name: str) -> None:
    if loop_name == "uvloop":
        import uvloop

        uvloop.install()
    canned = canned_responses(port)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: FloorProtocol(canned), "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"floor server on port {port} did not come up")


def measure(bootstrap: str, pid: int, connections: int, seconds: float) -> dict:
    """The acks_all.py requests/s row against ``bootstrap``, with ``pid``'s CPU meanwhile."""
    from bench.acks_all import requests_per_second

    before = machine_cpu.snapshot()
    row = requests_per_second(bootstrap, TOPIC, connections, seconds)
    after = machine_cpu.snapshot()
    cpu_s = machine_cpu.used_seconds(before, after, pid)
    requests = row["requests_per_sec"] * (after.at - before.at)
    row["server_cpu_us_per_request"] = cpu_s / max(requests, 1) * 1e6
    row["server_cores"] = cpu_s / (after.at - before.at)
    row["cpu"] = machine_cpu.cpu_between(before, after, [pid])
    return row


def floor_row(loop_name: str, connections: int, seconds: float) -> dict:
    port = _free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--loop", loop_name]
    proc = subprocess.Popen(cmd)
    try:
        _wait_port(port)
        return measure(f"127.0.0.1:{port}", proc.pid, connections, seconds)
    finally:
        proc.terminate()
        proc.wait(10)


def quill_row(connections: int, seconds: float, src: Path | None = None) -> dict:
    """One broker of this tree (or of the exported tree ``src``) answering the client."""
    from bench.localstack import local_cluster
    from bench.throughput import create_topic

    with local_cluster(1, src=src) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 1)
        (proc,) = cluster.brokers.values()
        return measure(cluster.bootstrap, proc.pid, connections, seconds)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--loops", default="asyncio,uvloop", help="floor rows to run")
    p.add_argument("--no-quill", action="store_true", help="skip the Quill broker row")
    p.add_argument("--serve", type=int, metavar="PORT", help="only run the floor server")
    p.add_argument("--loop", default="asyncio", choices=("asyncio", "uvloop"))
    p.add_argument("--baseline", help="git ref whose broker makes a 'before' row first")
    args = p.parse_args(argv)
    if args.serve:
        serve(args.serve, args.loop)
        return 0
    model = machine_cpu.cpu_model()
    rows = [
        (f"floor, {name} loop", floor_row(name, args.connections, args.seconds))
        for name in args.loops.split(",")
        if name
    ]
    if not args.no_quill and args.baseline:
        from bench.acks_all import export_tree

        src = export_tree(args.baseline)
        try:
            row = quill_row(args.connections, args.seconds, src)
        finally:
            shutil.rmtree(src, ignore_errors=True)
        rows.append((f"one Quill broker, before ({args.baseline})", row))
    if not args.no_quill:
        rows.append(("one Quill broker", quill_row(args.connections, args.seconds)))
    floors = {name: r for name, r in rows if name.startswith("floor")}
    print(f"acks=1 1-record requests, {args.connections} connections, {args.seconds:g} s")
    print(
        "| CPU | server | requests/s | server µs CPU/request | requests per core-second "
        "| server cores | vs floors |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, r in rows:
        ratio = ""
        if not name.startswith("floor"):
            ratio = ", ".join(
                f"{f.split(', ')[1]}: {r['requests_per_sec'] / fr['requests_per_sec']:.2f}x "
                f"req/s, {r['server_cpu_us_per_request'] / fr['server_cpu_us_per_request']:.1f}x "
                "CPU/req"
                for f, fr in floors.items()
            )
        print(
            f"| {model} | {name} | {r['requests_per_sec']:,.0f} | "
            f"{r['server_cpu_us_per_request']:.1f} | {1e6 / r['server_cpu_us_per_request']:,.0f} | "
            f"{r['server_cores']:.2f} | {ratio} |"
        )
        print(f"|  | machine meanwhile | {machine_cpu.describe(r['cpu'])} | | | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
