"""The workload's clients, run inside a client host (`ip netns exec q77-c1 python -m
faults.client KIND ...`). Each prints one JSON object a line: what it sent and what the
cluster acknowledged, for the checker.

  produce  idempotent acks=all producer: {"v", "p", "o", "t"} per ack, {"v", "err"} per failure
  txn      transactional producer: {"txn", "vals", "outcome": commit|abort|unknown}
  group    a group member that commits after each batch: {"commit": {p: offset}, "t"}
  offsets  watches the group's committed offsets: {"p", "o", "t"}
  read     reads the whole topic to the end: {"p", "o", "v"}
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def emit(**fields) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def produce(args) -> None:
    """acks=all, idempotent; a producer that fails fatally (an application would start
    another) is replaced, and the failure recorded. Ends with {"sent": n, "writer"}: the
    records writer-0 .. writer-(n-1) were handed to a producer, acknowledged or not."""

    def report(err, msg):
        value = msg.value().decode()
        if err is None:
            emit(v=value, p=msg.partition(), o=msg.offset(), t=time.time())
        else:
            emit(v=value, err=str(err))

    end = time.monotonic() + args.seconds
    seq = 0
    try:
        while time.monotonic() < end:
            producer = Producer({
                "bootstrap.servers": args.bootstrap, "enable.idempotence": True,
                "acks": "all", "message.timeout.ms": args.timeout_ms, "linger.ms": 5,
            })  # fmt: skip
            try:
                while time.monotonic() < end:
                    value = f"{args.writer}-{seq}"
                    producer.produce(args.topic, value.encode(), partition=seq % args.partitions,
                                     on_delivery=report)  # fmt: skip
                    seq += 1
                    producer.poll(1.0 / args.rate)
                producer.flush(args.timeout_ms / 1000 + 5)
            except KafkaException as exc:
                emit(fatal=str(exc.args[0]), t=time.time())
    finally:
        emit(sent=seq, writer=args.writer)


def transactions(args) -> None:
    rng = random.Random(args.writer)
    producer = Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": f"faults-{args.writer}",
        "transaction.timeout.ms": 60000, "message.timeout.ms": min(args.timeout_ms, 60000),
    })  # fmt: skip
    producer.init_transactions(60)
    end = time.monotonic() + args.seconds
    txn = 0
    while time.monotonic() < end:
        values = [f"{args.writer}-{txn}-{i}" for i in range(3)]
        outcome = "unknown"
        try:
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce(args.topic, value.encode(), partition=(txn + i) % args.partitions)
            if rng.random() < 0.3:
                producer.abort_transaction(30)
                outcome = "abort"
            else:
                producer.commit_transaction(30)
                outcome = "commit"
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    outcome = "abort"
                except KafkaException:
                    pass
            elif error.fatal():
                emit(txn=txn, vals=values, outcome="unknown", err=str(error))
                return
        emit(txn=txn, vals=values, outcome=outcome)
        txn += 1
        time.sleep(0.05)


def group_member(args) -> None:
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe([args.topic])
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        batch = consumer.consume(50, 0.5)
        if not batch:
            continue
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            emit(commit_error=str(exc.args[0]), t=time.time())
            continue
        emit(commit={tp.partition: tp.offset for tp in done if tp.offset >= 0}, t=time.time())
    consumer.close()


def watch_offsets(args) -> None:
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group})
    partitions = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        try:
            for tp in consumer.committed(partitions, timeout=5):
                if tp.offset >= 0:
                    emit(p=tp.partition, o=tp.offset, t=time.time())
        except KafkaException:
            pass
        time.sleep(0.5)
    consumer.close()


def read_all(args) -> None:
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": f"faults-read-{time.time()}",
        "enable.auto.commit": False, "isolation.level": args.isolation,
    })  # fmt: skip
    ends = {}
    for p in range(args.partitions):
        tp = TopicPartition(args.topic, p)
        ends[p] = consumer.get_watermark_offsets(tp, timeout=30)[1]
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    positions = dict.fromkeys(ends, 0)
    deadline = time.monotonic() + 120
    # read_committed stops at the last stable offset: a partition is done once its
    # position stops short of the high watermark only by markers and aborted records.
    idle = 0
    while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            idle += 1
            if idle > 5:
                break
            continue
        idle = 0
        if msg.error():
            continue
        emit(p=msg.partition(), o=msg.offset(), v=msg.value().decode())
        positions[msg.partition()] = msg.offset() + 1
    for tp in consumer.position([TopicPartition(args.topic, p) for p in ends]):
        positions[tp.partition] = max(positions[tp.partition], tp.offset)
    emit(done=True, positions=positions, ends=ends)
    consumer.close()


KINDS = {"produce": produce, "txn": transactions, "group": group_member,
         "offsets": watch_offsets, "read": read_all}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="faults.client")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--writer", default="w1")
    parser.add_argument("--group", default="faults")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--timeout-ms", type=int, default=60000)
    parser.add_argument("--isolation", default="read_committed")
    args = parser.parse_args(argv)
    KINDS[args.kind](args)


if __name__ == "__main__":
    main()
