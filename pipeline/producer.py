"""Writing records from Spark: the sink's rows out of Arrow, and a librdkafka producer
that knows whether everything it sent was acknowledged.

Every producer here is idempotent (acks=all, enable.idempotence): a retried send is
never written twice and, per partition, the log holds a prefix of what was sent, in
order. The exactly-once sink (`pipeline.exactly_once`) builds on that prefix property.
Keyed records go to murmur2(key) % partitions like Kafka's Java client (and so Spark's
Kafka sink); unkeyed ones to a random partition.
"""

from __future__ import annotations

FLUSH_TIMEOUT_S = 120.0


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

    def __init__(self, bootstrap: str, kafka: dict):
        from confluent_kafka import KafkaException, Producer

        from pipeline.options import OptionError

        errors: list[str] = []

        def failed(err, msg) -> None:  # no reference to self: the producer goes with it
            if err is not None and len(errors) < 5:
                errors.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")

        conf = producer_config(bootstrap, kafka)
        conf.update({"delivery.report.only.error": True, "on_delivery": failed})
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
                self._producer.produce(topic, value, key, partition=part, headers=headers)
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
                    produce(topic, value, key)  # the common case, without keyword parsing
                else:
                    part = -1 if partition is None else partition
                    produce(topic, value, key, partition=part, headers=headers)
            except BufferError:  # the local queue is full
                self._send_waiting(topic, value, key, partition, headers)
            n += 1
            if not n & 1023:
                poll(0)
        self.sent += n
        return n

    def flush(self) -> int:
        """Wait for every acknowledgement; raises DeliveryError if any send failed."""
        left = self._producer.flush(FLUSH_TIMEOUT_S)
        if left:
            raise DeliveryError(f"{left} records were not acknowledged within {FLUSH_TIMEOUT_S} s.")
        if self.errors:
            raise DeliveryError("Writing failed: " + "; ".join(self.errors))
        return self.sent


def sink_rows(batch, columns: dict[str, str], topic_option: str | None):
    """(topic, value, key, partition, headers) per row of an Arrow batch. `columns`
    maps the sink's column names to the batch's (Spark matches names without case)."""
    n = batch.num_rows

    def column(name: str) -> list:
        actual = columns.get(name)
        return batch.column(actual).to_pylist() if actual else [None] * n

    topics = [topic_option] * n if topic_option else column("topic")
    if None in topics:
        raise ValueError(
            "A row has a null 'topic' and no 'topic' option is set; every row needs a topic."
        )
    headers = column("headers")
    if "headers" in columns:
        headers = [[(h["key"], h["value"]) for h in hs] if hs else None for hs in headers]
    return zip(topics, column("value"), column("key"), column("partition"), headers, strict=True)
