"""Writing records from Spark: the sink's rows out of Arrow, and a librdkafka producer
that knows whether everything it sent was acknowledged.

Every producer here is idempotent (acks=all, enable.idempotence): a retried send is
never written twice and, per partition, the log holds a prefix of what was sent, in
order. The exactly-once sink (`pipeline.exactly_once`) builds on that prefix property.
Keyed records go to murmur2(key) % partitions like Kafka's Java client (and so Spark's
Kafka sink); unkeyed ones to a random partition.
"""

from __future__ import annotations

import logging

log = logging.getLogger("pipeline.sink")

FLUSH_TIMEOUT_S = 120.0
# How long a task's transaction may stay open before the coordinator aborts it:
# librdkafka's 60 s default is short for a large task; the broker allows up to 15 min
# (transaction.max.timeout.ms). kafka.transaction.timeout.ms overrides.
TRANSACTION_TIMEOUT_MS = 300_000


def producer_config(bootstrap: str, kafka: dict) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
        **kafka,
        # not overridable: what the sink's guarantees rest on
        "enable.idempotence": True,
        "acks": "all",
    }


class DeliveryError(RuntimeError):
    """Records the cluster did not acknowledge."""


class RecordProducer:
    """A producer that counts what it sends and remembers the first delivery errors.
    Delivery reports come for failures only (delivery.report.only.error): a Python
    callback per acknowledged record would cost more than producing it."""

    def __init__(self, bootstrap: str, kafka: dict, extra: dict | None = None):
        from confluent_kafka import KafkaException, Producer

        from pipeline.options import OptionError

        errors: list[str] = []

        def failed(err, msg) -> None:  # no reference to self: the producer goes with it
            if err is not None and len(errors) < 5:
                errors.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")

        conf = producer_config(bootstrap, kafka)
        conf.update({"delivery.report.only.error": True, "on_delivery": failed, **(extra or {})})
        try:
            self._producer = Producer(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise OptionError(f"librdkafka does not accept the kafka.* options: {exc}") from None
        self.sent = 0
        self.errors = errors

    def send(self, topic: str, value, key=None, partition=None, headers=None) -> None:
        self._send_waiting(topic, value, key, partition, headers)
        self.sent += 1

    def _send_waiting(self, topic, value, key, partition, headers) -> None:
        """produce(), waiting while the local queue is full."""
        part = -1 if partition is None else partition
        while True:
            try:
                self._producer.produce(topic, value, key, part, None, None, 0, headers)
                return
            except BufferError:  # let deliveries drain
                self._producer.poll(0.05)

    def send_all(self, rows) -> int:
        """Send (topic, value, key, partition or None, headers or None) tuples; returns
        how many."""
        produce, poll = self._producer.produce, self._producer.poll
        n = 0
        for topic, value, key, partition, headers in rows:
            try:
                if partition is None and headers is None:
                    produce(topic, value, key)  # the common case
                else:  # positional: keyword parsing costs more than the header itself
                    part = -1 if partition is None else partition
                    produce(topic, value, key, part, None, None, 0, headers)
            except BufferError:  # the local queue is full
                self._send_waiting(topic, value, key, partition, headers)
            n += 1
            if not n & 1023:
                poll(0)
        self.sent += n
        return n

    def abandon(self) -> None:
        """After a failure: drop what is still queued and wait for what is in flight, so
        that no record of this producer lands after the next attempt has looked. The
        producer is not shared any more."""
        for key, shared in list(_SHARED.items()):
            if shared is self:
                del _SHARED[key]
        self._producer.purge(in_queue=True, in_flight=False)
        self._producer.flush(FLUSH_TIMEOUT_S)

    def close(self) -> None:
        """Let a producer whose last user has flushed go (librdkafka stops with it)."""
        self._producer.flush(FLUSH_TIMEOUT_S)
        self._producer = None

    def flush(self) -> int:
        """Wait for every acknowledgement; raises DeliveryError if any send failed."""
        left = self._producer.flush(FLUSH_TIMEOUT_S)
        if left:
            raise DeliveryError(f"{left} records were not acknowledged within {FLUSH_TIMEOUT_S} s.")
        if self.errors:
            raise DeliveryError("Writing failed: " + "; ".join(self.errors))
        return self.sent


class TransactionalProducer(RecordProducer):
    """One task attempt's producer with its own transactional.id. Created, it runs
    InitProducerId, which fences every earlier producer of that id (their later sends
    and commits are refused) and completes the transaction they had open (aborts it,
    or finishes writing its commit) before it returns."""

    def __init__(self, bootstrap: str, kafka: dict, transactional_id: str):
        from confluent_kafka import KafkaException

        extra = {"transactional.id": transactional_id}
        if "transaction.timeout.ms" not in kafka:
            extra["transaction.timeout.ms"] = TRANSACTION_TIMEOUT_MS
        super().__init__(bootstrap, kafka, extra)
        try:
            self._producer.init_transactions(FLUSH_TIMEOUT_S)
        except KafkaException as exc:
            raise DeliveryError(
                f"Could not start transactions as {transactional_id!r}: {exc.args[0].str()}"
            ) from None

    def begin(self) -> None:
        self._producer.begin_transaction()

    def commit(self) -> int:
        """Flush and commit; raises DeliveryError if the transaction did not commit."""
        from confluent_kafka import KafkaException

        try:
            self._producer.commit_transaction(FLUSH_TIMEOUT_S)
        except KafkaException as exc:
            detail = "; ".join(self.errors) or exc.args[0].str()
            raise DeliveryError(f"The transaction did not commit: {detail}") from None
        return self.sent

    def abort(self) -> None:
        """Abort what is open; if even that fails (fenced, coordinator gone), the next
        attempt's InitProducerId or the transaction timeout aborts it."""
        from confluent_kafka import KafkaException

        try:
            self._producer.abort_transaction(FLUSH_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("abort_transaction failed (%s); the next attempt aborts it", exc)

    def close(self) -> None:
        self._producer = None  # librdkafka stops with the last reference


_SHARED: dict[tuple, RecordProducer] = {}  # least recently used first
SHARED_MAX = 4  # clusters (or settings) a worker keeps a producer for


def shared_producer(bootstrap: str, kafka: dict) -> RecordProducer:
    """This process's producer for a cluster and settings, its counts reset. A Spark
    Python worker runs one task at a time and lives on for the next ones
    (spark.python.worker.reuse), so a task after the first skips librdkafka's start:
    connections, and the idempotent producer's id, up to 0.5 s here. Every task
    flushes before it returns; one that fails abandons its producer."""
    key = (bootstrap, tuple(sorted(kafka.items())))
    producer = _SHARED.pop(key, None)
    if producer is None:
        producer = RecordProducer(bootstrap, kafka)
        while len(_SHARED) >= SHARED_MAX:  # the least recently used goes
            _SHARED.pop(next(iter(_SHARED))).close()
    _SHARED[key] = producer
    producer.sent = 0
    producer.errors.clear()
    return producer


def close_shared() -> None:
    """Flush and drop this process's shared producers (before their cluster goes away:
    an idle producer would go on reconnecting)."""
    while _SHARED:
        _SHARED.popitem()[1].close()


class SinkColumns:
    """One Arrow batch's sink columns as the Python lists produce() takes. `columns`
    maps the sink's column names to the batch's (Spark matches names without case)."""

    def __init__(self, batch, columns: dict[str, str], topic_option: str | None):
        self.batch, self.columns, self.n = batch, columns, batch.num_rows
        self._objects: dict[str, object] = {}  # name -> object ndarray, for the hashes
        n = self.n
        self.values = self._list("value")
        self.keys = self._list("key") if "key" in columns else [None] * n
        self.partitions = self._list("partition") if "partition" in columns else [None] * n
        self.topics = [topic_option] * n if topic_option else self._list("topic")
        if None in self.topics:
            raise ValueError(
                "A row has a null 'topic' and no 'topic' option is set; every row needs a topic."
            )
        self.headers = [None] * n
        if "headers" in columns:
            self.headers = [
                [(h["key"], h["value"]) for h in hs] if hs else None for hs in self._list("headers")
            ]
        self.topic_option = topic_option

    def _arrow(self, name: str):
        return self.batch.column(self.columns[name])

    def _list(self, name: str) -> list:
        if name in ("value", "key", "topic"):  # via numpy: the hashes reuse the array
            objects = self._objects[name] = self._arrow(name).to_numpy(zero_copy_only=False)
            return objects.tolist()
        return self._arrow(name).to_pylist()

    def rows(self):
        """(topic, value, key, partition, headers) per row."""
        return zip(self.topics, self.values, self.keys, self.partitions, self.headers, strict=True)

    def for_hashing(self) -> dict:
        """{column: (numpy array, null mask or None)} of the columns that decide the
        record: value, key, and the topic, partition and headers columns when present
        (pipeline.record_ids)."""
        import numpy as np

        out = {}
        for name in ("value", "key"):
            if name in self._objects:
                arrow = self._arrow(name)
                nulls = arrow.is_null().to_numpy(zero_copy_only=False) if arrow.null_count else None
                out[name] = (self._objects[name], nulls)
        if "topic" in self._objects and not self.topic_option:
            out["topic"] = (self._objects["topic"], None)
        if "partition" in self.columns:
            out["partition"] = (np.array([-1 if p is None else p for p in self.partitions]), None)
        if "headers" in self.columns:
            from pipeline.record_ids import headers_bytes

            encoded = np.empty(self.n, dtype=object)
            encoded[:] = [headers_bytes(hs) if hs else b"" for hs in self.headers]
            out["headers"] = (encoded, None)
        return out


def sink_rows(batch, columns: dict[str, str], topic_option: str | None):
    """(topic, value, key, partition, headers) per row of an Arrow batch."""
    return SinkColumns(batch, columns, topic_option).rows()
