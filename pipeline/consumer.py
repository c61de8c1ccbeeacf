"""Executor side of the source: read one offset range of one partition into Arrow.

Each Spark task reads its `OffsetRange` straight from the partition's leader with its
own librdkafka consumer (assign, never subscribe, never commit). The broker only hands
consumers committed records (below the high watermark), so a range planned from the
high watermark is always readable in full unless data was deleted meanwhile.

Offsets inside a range may be missing (compacted away, or transaction markers); the
read is done when it has passed the range's end or the broker says the partition ends
(PARTITION_EOF) at or after it. Offsets below the log start are data loss, handled by
failOnDataLoss.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from pipeline.offsets import client_config, data_loss, new_consumer
from pipeline.options import SourceOptions
from pipeline.worker import prepare_worker

ROWS_PER_BATCH = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch default
CONSUME_TIMEOUT_S = 0.2
# librdkafka's timestamp types -> Kafka's TimestampType ids, as Spark shows them:
# 0 not available -> -1, 1 CreateTime -> 0, 2 LogAppendTime -> 1.
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


@dataclass
class OffsetRange(InputPartition):
    """[start, end) of one topic-partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


def _take(messages: list, keep, position: int, end: int, on_error) -> int:
    """keep() the records in [position, end); errors and EOF go to `on_error`, which
    returns the new position. Returns the next offset to read."""
    for m in messages:
        if m.error() is not None:
            position = on_error(m, position)
            continue
        offset = m.offset()
        if offset < position:
            continue  # fetched before a seek
        if offset >= end:
            return end
        keep(m)
        position = offset + 1
    return position


def arrow_batch(messages: list, rng: OffsetRange, schema, include_headers: bool):
    """librdkafka messages of one partition -> an Arrow record batch of `schema`."""
    import pyarrow as pa

    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    arrays = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([rng.topic] * n, pa.string()),
        pa.array([rng.partition] * n, pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([s[1] for s in stamps], pa.timestamp("ms", tz="UTC")).cast(
            pa.timestamp("us", tz="UTC")
        ),
        pa.array([_TIMESTAMP_TYPE.get(s[0], -1) for s in stamps], pa.int32()),
    ]
    if include_headers:
        headers = [m.headers() for m in messages]
        arrays.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class RangeReader:
    """Reads one OffsetRange; `chunks()` yields lists of librdkafka messages, in offset
    order, up to ROWS_PER_BATCH at a time."""

    def __init__(self, rng: OffsetRange, opts: SourceOptions):
        self.rng = rng
        self.tp = f"{rng.topic}-{rng.partition}"
        self.opts = opts
        self.consumer = None

    def chunks(self) -> Iterator[list]:
        if self.rng.size == 0:
            return
        conf = client_config(self.opts.bootstrap, self.opts.kafka, "executor")
        conf.update({"auto.offset.reset": "error", "enable.partition.eof": True})
        self.consumer = new_consumer(conf)
        try:
            self._seek(self.rng.start)
            yield from self._read()
        finally:
            self.consumer.close()

    def _seek(self, offset: int) -> int:
        from confluent_kafka import TopicPartition

        self.consumer.assign([TopicPartition(self.rng.topic, self.rng.partition, offset)])
        return offset

    def _read(self) -> Iterator[list]:
        position, end = self.rng.start, self.rng.end
        timeout_s = self.opts.poll_timeout_ms / 1000
        last_progress = time.monotonic()
        chunk: list = []
        while position < end:
            wanted = min(end - position, ROWS_PER_BATCH)
            messages = self.consumer.consume(wanted, timeout=CONSUME_TIMEOUT_S)
            nxt = _take(messages, chunk.append, position, end, self._on_error)
            if nxt != position:
                position = nxt
                last_progress = time.monotonic()
            if len(chunk) >= ROWS_PER_BATCH:
                yield chunk
                chunk = []
            if position < end and time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(
                    f"No record from {self.tp} for {self.opts.poll_timeout_ms} ms "
                    f"(kafkaConsumer.pollTimeoutMs) at offset {position}, reading up to {end}. "
                    "Is the partition's leader up?"
                )
        if chunk:
            yield chunk

    def _on_error(self, message, position: int) -> int:
        """An error or EOF event at `position`: the position to go on from."""
        from confluent_kafka import KafkaError

        err = message.error()
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            high = message.offset()
            if high >= self.rng.end:
                return self.rng.end  # what is left of the range are gaps
            if high < position:
                data_loss(
                    f"{self.tp} now ends at offset {high}, before offset {position} that was "
                    "already read.",
                    self.opts.fail_on_data_loss,
                )
                return self.rng.end
            return position
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            return self._out_of_range(position)
        if err.retriable() or code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
            return position  # librdkafka retries; pollTimeoutMs bounds the wait
        raise RuntimeError(f"Reading {self.tp} at offset {position} failed: {err.str()}")

    def _out_of_range(self, position: int) -> int:
        from confluent_kafka import TopicPartition

        low, high = self.consumer.get_watermark_offsets(
            TopicPartition(self.rng.topic, self.rng.partition), timeout=30, cached=False
        )
        end = self.rng.end
        if position < low:
            data_loss(
                f"Offsets {position} to {min(low, end) - 1} of {self.tp} are no longer in the "
                f"log (it now starts at {low}).",
                self.opts.fail_on_data_loss,
            )
            return end if low >= end else self._seek(low)
        data_loss(
            f"Offset {position} of {self.tp} is beyond its end ({high}); was the topic re-created?",
            self.opts.fail_on_data_loss,
        )
        return end


def read_range(rng: OffsetRange, opts: SourceOptions, schema) -> Iterator:
    """The range as Arrow record batches of `schema` (the source's)."""
    prepare_worker("pyarrow", "confluent_kafka")
    for chunk in RangeReader(rng, opts).chunks():
        yield arrow_batch(chunk, rng, schema, opts.include_headers)
