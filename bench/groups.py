"""Consumer-group benchmark: rebalance time and offset-commit throughput.

    python bench/groups.py                    # starts ZooKeeper + 3 brokers (RF 3)
    python bench/groups.py --brokers 1        # one broker, RF 1
    python bench/groups.py --bootstrap-server host:9092

Measures:

- rebalance: 10 librdkafka consumers subscribe at once to a 60-partition topic; the time
  from the first subscribe to every member consuming (all 60 partitions owned, each
  member has read a record), with group.initial.rebalance.delay.ms=0; then the time for
  the remaining 9 to take over after one member leaves (LeaveGroup), and the broker's
  own share: JoinGroup to the last SyncGroup answer of a 10-member raw-protocol group.
- commits: OffsetCommit requests acknowledged per second (each commits one partition
  and is answered once the record in __consumer_offsets is committed, acks=all), from
  64 connections that each send back to back (a connection carries one request at a
  time, as Kafka's do).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import struct
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.localstack import local_cluster  # noqa: E402
from broker.protocol.messages import (  # noqa: E402
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)

BROKER_PROPS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(timeout=60)


# -- rebalance ---------------------------------------------------------------------------------
def rebalance(bootstrap: str, members: int, partitions: int, rf: int) -> dict:
    from confluent_kafka import Consumer, Producer

    topic, group = f"bench-rb-{uuid.uuid4().hex[:6]}", f"bench-rb-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, partitions, rf)
    producer = Producer({"bootstrap.servers": bootstrap})
    for p in range(partitions):
        for i in range(5):
            producer.produce(topic, b"x%d" % i, partition=p)
    producer.flush(30)
    lock = threading.Lock()
    owned: dict[int, str] = {}
    consumed: set[str] = set()
    stop = threading.Event()
    leaving = threading.Event()

    def run(name: str) -> None:
        def on_assign(c, tps):
            with lock:
                for tp in tps:
                    owned[tp.partition] = name

        def on_revoke(c, tps):
            with lock:
                for tp in tps:
                    if owned.get(tp.partition) == name:
                        del owned[tp.partition]

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 100,
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set() and not (name == "m0" and leaving.is_set()):
            msg = c.poll(0.01)
            if msg is not None and not msg.error():
                with lock:
                    consumed.add(name)
        c.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(f"m{i}",), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    while True:
        with lock:
            if len(owned) == partitions and len(consumed) == members:
                break
        time.sleep(0.001)
    join_all = time.perf_counter() - started
    started = time.perf_counter()
    leaving.set()
    threads[0].join(30)
    while True:
        with lock:
            if len(owned) == partitions and "m0" not in owned.values():
                break
        time.sleep(0.001)
    after_leave = time.perf_counter() - started
    stop.set()
    for t in threads:
        t.join(30)
    return {"join_all_s": join_all, "after_leave_s": after_leave}


# -- raw protocol clients -----------------------------------------------------------------------
class Conn:
    """One connection, one request at a time."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        return cls(*await asyncio.open_connection(host, port))

    async def request(self, api_key: int, version: int, body: dict):
        self.correlation += 1
        req = build(request_schema(api_key, version), body)
        self.writer.write(
            encode_request(RequestHeader(api_key, version, self.correlation, "bench"), req)
        )
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        return parse_response(api_key, version, await self.reader.readexactly(size))[1]

    def close(self) -> None:
        self.writer.close()


async def coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await Conn.open(host, int(port))
    try:
        while True:
            resp = await conn.request(10, 3, {"key": group, "key_type": 0})
            if resp.error_code == 0:
                return resp.host, resp.port
            await asyncio.sleep(0.2)
    finally:
        conn.close()


def _subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


async def _member(conn: Conn, body: dict, member_id: str = "") -> tuple[str, int]:
    """Join and sync until a generation is complete, as a client does; (member id,
    generation)."""
    while True:
        joined = await conn.request(11, 5, {**body, "member_id": member_id})
        if joined.error_code == 79:  # MEMBER_ID_REQUIRED
            member_id = joined.member_id
            continue
        member_id = joined.member_id
        assignments = []
        if joined.leader == member_id:
            assignments = [{"member_id": m.member_id, "assignment": b""} for m in joined.members]
        sync = await conn.request(
            14,
            3,
            {
                "group_id": body["group_id"],
                "generation_id": joined.generation_id,
                "member_id": member_id,
                "assignments": assignments,
            },
        )
        if sync.error_code == 0:
            return member_id, joined.generation_id


async def raw_rebalance(bootstrap: str, members: int, topic: str) -> float:
    """The broker's share of a rebalance: a stable group of raw members (no client-side
    delays) rebalances; seconds from the first JoinGroup to the last SyncGroup answer."""
    group = f"bench-raw-{uuid.uuid4().hex[:6]}"
    host, port = await coordinator(bootstrap, group)
    conns = [await Conn.open(host, port) for _ in range(members)]
    body = {
        "group_id": group,
        "session_timeout": 30000,
        "rebalance_timeout": 30000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": _subscription(topic)}],
    }
    ids = [m for m, _ in await asyncio.gather(*(_member(c, body) for c in conns))]
    while True:  # until every member is in one generation
        rounds = [_member(c, body, m) for c, m in zip(conns, ids, strict=True)]
        if len({g for _, g in await asyncio.gather(*rounds)}) == 1:
            break
    started = time.perf_counter()
    await asyncio.gather(*(_member(c, body, m) for c, m in zip(conns, ids, strict=True)))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    return elapsed


async def commits(bootstrap: str, topic: str, connections: int, seconds: float) -> dict:
    group = f"bench-commit-{uuid.uuid4().hex[:6]}"
    host, port = await coordinator(bootstrap, group)
    conns = [await Conn.open(host, port) for _ in range(connections)]
    done = errors = 0
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def worker(conn: Conn, n: int) -> None:
        nonlocal done, errors
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": topic, "partitions": [{"partition_index": n % 6, "committed_offset": n}]}
            ],
        }
        # the same request every time: the client's own cost stays out of the figure
        frame = encode_request(RequestHeader(8, 8, 1, "bench"), build(request_schema(8, 8), body))
        ok = None  # the bytes of a success: the same answer every time
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            conn.writer.write(frame)
            (size,) = struct.unpack(">i", await conn.reader.readexactly(4))
            answer = await conn.reader.readexactly(size)
            latencies.append(time.perf_counter() - t0)
            if (
                ok is None
                and parse_response(8, 8, answer)[1].topics[0].partitions[0].error_code == 0
            ):
                ok = answer
            if answer == ok:
                done += 1
            else:
                errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(c, i) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - started
    for c in conns:
        c.close()
    latencies.sort()
    return {
        "commits_per_s": done / elapsed,
        "errors": errors,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-server", help="use this cluster instead of starting one")
    p.add_argument("--brokers", type=int, default=3, help="brokers to start (RF = min(3, n))")
    p.add_argument("--members", type=int, default=10)
    p.add_argument("--partitions", type=int, default=60)
    p.add_argument("--connections", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0, help="length of the commit run")
    p.add_argument("--skip", action="append", default=[], choices=["rebalance", "commits"])
    args = p.parse_args(argv)
    rf = min(3, args.brokers)
    with contextlib.ExitStack() as stack:
        bootstrap = args.bootstrap_server or (
            stack.enter_context(local_cluster(args.brokers, BROKER_PROPS)).bootstrap
        )
        topic = f"bench-commit-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 6, rf)
        asyncio.run(coordinator(bootstrap, "warm-up"))
        if "rebalance" not in args.skip:
            rb = rebalance(bootstrap, args.members, args.partitions, rf)
            raw = asyncio.run(raw_rebalance(bootstrap, args.members, topic))
        if "commits" not in args.skip:
            cm = asyncio.run(commits(bootstrap, topic, args.connections, args.seconds))
    print(f"brokers: {args.bootstrap_server or args.brokers}, offsets RF {rf}")
    if "rebalance" not in args.skip:
        _print_rebalance(args, rb, raw)
    if "commits" not in args.skip:
        print(f"offset commits, {args.connections} connections, acks=all:")
        print(
            f"  {cm['commits_per_s']:,.0f} commits/s  (p50 {cm['p50_ms']:.1f} ms, "
            f"p99 {cm['p99_ms']:.1f} ms, {cm['errors']} errors)"
        )
    return 0


def _print_rebalance(args, rb: dict, raw: float) -> None:
    print(f"rebalance, {args.members} librdkafka members on {args.partitions} partitions:")
    print(f"  subscribe -> all members consuming   {rb['join_all_s'] * 1000:8.0f} ms")
    print(f"  one member leaves -> reassigned      {rb['after_leave_s'] * 1000:8.0f} ms")
    print(
        f"  broker only: JoinGroup -> last Sync  {raw * 1000:8.1f} ms ({args.members} raw members)"
    )


if __name__ == "__main__":
    sys.exit(main())
