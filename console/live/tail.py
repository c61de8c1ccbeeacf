"""Live tail of one topic-partition for the Messages page.

A browser on /ws/live/ sends {"tail": {"topic", "partition", "format"}}; the consumer
checks the role (viewer, as for reading messages) and validates the partition, then
starts a Tail: a librdkafka consumer of its own (never joining a group, never
committing) assigned at the partition's end as of that moment, polled in a worker
thread. New records go to that socket only, in batches:
{"tail_records": {"topic", "partition", "records": [...]}} with each record rendered
as the page renders it (text, pretty JSON or hex). {"untail": true}, another "tail"
or the socket closing stops it and closes the librdkafka consumer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from confluent_kafka import Consumer, KafkaError, TopicPartition

from cluster_client import clusters
from cluster_client.admin import RDKAFKA_LOG
from cluster_client.errors import OpError
from console import fmt
from console.changes import messages as message_ops
from console.changes import validation

log = logging.getLogger(__name__)
BATCH = 200  # records per poll, and so at most per websocket message
POLL_S = 0.2  # how long a stop may wait for the poll under way


def validate(topic, partition, format_) -> tuple[str, int, str]:
    """(topic, partition, format) or OpError with field detail; reads ZooKeeper."""
    topic = validation.topic_name(topic or "", "topic")
    p = message_ops._partition(topic, partition)
    if format_ not in message_ops.FORMATS:
        raise OpError(f"Format must be one of {', '.join(message_ops.FORMATS)}.", "format")
    return topic, p, format_


def tail_record(msg, format_: str) -> dict:
    record = message_ops.record_dict(msg, format_)
    record["ts_text"] = fmt.timestamp(record["timestamp"])
    return record


class Tail:
    def __init__(self, topic: str, partition: int, format_: str, send: Callable[[dict], Awaitable]):
        self.topic, self.partition, self.format = topic, partition, format_
        self.send = send
        self.start_offset: int | None = None
        self._stop = False
        self._task: asyncio.Task | None = None
        self._consumer: Consumer | None = None

    async def start(self) -> int:
        """Assign at the current end; returns that offset (the first one tailed)."""
        self._consumer = Consumer(
            {
                "bootstrap.servers": clusters.current().bootstrap,
                "group.id": f"quill-console-tail-{uuid.uuid4().hex[:8]}",  # never joined
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "client.id": "quill-console-tail",
                "fetch.wait.max.ms": 100,
                "socket.timeout.ms": 8000,
                "logger": RDKAFKA_LOG,
                **clusters.current().client_security,
            }
        )
        try:
            self.start_offset = await asyncio.to_thread(self._assign_at_end)
        except Exception:
            await asyncio.to_thread(self._consumer.close)
            raise
        self._task = asyncio.create_task(self._run())
        return self.start_offset

    def _assign_at_end(self) -> int:
        try:
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, self.partition), timeout=8
            )
        except Exception as exc:  # noqa: BLE001 - KafkaException, or None on a timeout
            raise OpError(f"Reading the end of {self.topic}-{self.partition}: {exc}") from exc
        self._consumer.assign([TopicPartition(self.topic, self.partition, high)])
        return high

    async def _run(self) -> None:
        consumer = self._consumer
        try:
            while not self._stop:
                msgs = await asyncio.to_thread(consumer.consume, BATCH, POLL_S)
                records = []
                for msg in msgs:
                    err = msg.error()
                    if err is None:
                        records.append(tail_record(msg, self.format))
                    elif err.code() != KafkaError._PARTITION_EOF:
                        await self.send({"tail_error": {"message": err.str()}})
                if records and not self._stop:
                    await self.send(
                        {
                            "tail_records": {
                                "topic": self.topic,
                                "partition": self.partition,
                                "records": records,
                            }
                        }
                    )
        except Exception:  # noqa: BLE001 - a closed socket or a broken client ends the tail
            log.exception("live tail of %s-%s stopped", self.topic, self.partition)
        finally:
            await asyncio.to_thread(consumer.close)

    async def stop(self) -> None:
        """Stop polling and close the librdkafka consumer (waits for the poll under way,
        at most POLL_S, never cancelling it: a consumer must not close under a poll)."""
        self._stop = True
        if self._task is not None:
            await self._task
