"""Transactions of the other unmodified clients: aiokafka's and kafka-python's
transactional producers (older request versions than librdkafka: INVALID_PRODUCER_EPOCH
instead of PRODUCER_FENCED), and their read_committed consumers, which drop aborted
records by the aborted_transactions of the Fetch response."""

from __future__ import annotations

import asyncio

import pytest

from tests.group_helpers import create_topic, unique
from tests.txn_helpers import TXN_BROKER, read_all


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    return cluster_factory(1, **TXN_BROKER)


def test_aiokafka_commit_and_abort(cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = unique("t-aio")
    create_topic(cluster.bootstrap, topic, 1)

    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=cluster.bootstrap, transactional_id=unique("tx-aio")
        )
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send(topic, b"aio-c%d" % i, partition=0)
            await producer.begin_transaction()
            for i in range(5):
                await producer.send(topic, b"aio-a%d" % i, partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, b"aio-last", partition=0)
        finally:
            await producer.stop()

    async def consume(isolation: str) -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap, isolation_level=isolation, enable_auto_commit=False
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            for _ in range(20):
                batch = await consumer.getmany(tp, timeout_ms=500)
                values += [m.value for m in batch.get(tp, [])]
            return values
        finally:
            await consumer.stop()

    asyncio.run(produce())
    committed = [b"aio-c%d" % i for i in range(5)] + [b"aio-last"]
    assert asyncio.run(consume("read_committed")) == committed
    assert len(asyncio.run(consume("read_uncommitted"))) == 11
    assert read_all(cluster.bootstrap, topic, 1, "read_committed") == committed


def test_kafka_python_commit_and_abort(cluster):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique("t-kp")
    create_topic(cluster.bootstrap, topic, 1)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=unique("tx-kp"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"kp-c%d" % i, partition=0)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"kp-a%d" % i, partition=0)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = [m.value for m in consumer]
    finally:
        consumer.close()
    assert got == [b"kp-c%d" % i for i in range(4)]
    assert len(read_all(cluster.bootstrap, topic, 1, "read_uncommitted")) == 8
