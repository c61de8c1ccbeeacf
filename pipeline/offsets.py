"""Partitions and offsets as the cluster sees them (Spark's KafkaOffsetReader).

Runs on the driver: which topic-partitions a subscription covers, their earliest and
latest (high watermark) offsets and offsets by timestamp, all through a librdkafka
consumer that never subscribes and never commits (ListOffsets and Metadata only).
Consumers only ever see committed records, so "latest" is the high watermark.

Offsets travel through Spark's checkpoint as JSON `{topic: {"partition": offset}}`;
`to_json` and `from_json` convert to and from `{(topic, partition): offset}`.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from pipeline.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

log = logging.getLogger("pipeline")

TP = tuple[str, int]
METADATA_TIMEOUT_S = 30.0
INTERNAL_PREFIX = "__"  # __consumer_offsets, __quill_sink_*: never matched by a pattern


def _transient_codes() -> set[int]:
    from confluent_kafka import KafkaError

    return {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,  # just created: metadata not everywhere yet
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._UNKNOWN_PARTITION,
    }


_TRANSIENT = _transient_codes()


class DataLossError(RuntimeError):
    """Offsets the query needs are gone, and failOnDataLoss is true."""


def data_loss(message: str, fail: bool) -> None:
    """Spark's reportDataLoss: raise, or say so and go on."""
    if fail:
        raise DataLossError(
            f"{message} Some data may have been lost (deleted by retention, a deleted or "
            "re-created topic, or DeleteRecords). Set failOnDataLoss to false to skip what is "
            "gone and go on."
        )
    log.warning("%s Skipping it (failOnDataLoss=false).", message)


def to_json(offsets: dict[TP, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets: dict | None) -> dict[TP, int]:
    return {
        (topic, int(partition)): int(offset)
        for topic, parts in (offsets or {}).items()
        for partition, offset in parts.items()
    }


def client_config(bootstrap: str, kafka: dict, role: str) -> dict:
    """A consumer that only assigns: Spark's own connector sets a unique group.id and
    never commits; `kafka.group.id` overrides the id."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"quill-spark-{uuid.uuid4().hex[:12]}-{role}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        **kafka,
    }


def new_consumer(conf: dict):
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        raise OptionError(f"librdkafka does not accept the kafka.* options: {exc}") from None


class OffsetReader:
    """Driver-side lookups for one source."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._consumer = None

    @property
    def consumer(self):
        if self._consumer is None:
            self._consumer = new_consumer(
                client_config(self.opts.bootstrap, self.opts.kafka, "driver")
            )
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # ------------------------------------------------------------------ partitions

    def topic_sizes(self) -> dict[str, int]:
        """{topic: number of partitions}, every topic of the cluster. (Metadata for all
        topics: naming one could auto-create it on a broker that allows that.)"""
        from confluent_kafka import KafkaException

        try:
            md = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise RuntimeError(
                f"Cannot read metadata from kafka.bootstrap.servers={self.opts.bootstrap}: "
                f"{exc.args[0] if exc.args else exc}"
            ) from None
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def partitions(self) -> list[TP]:
        """The topic-partitions the subscription covers now, sorted."""
        sizes = self.topic_sizes()
        opts = self.opts
        if opts.strategy == "subscribe":
            found = [(t, p) for t in opts.topics if t in sizes for p in range(sizes[t])]
        elif opts.strategy == "subscribePattern":
            pattern = re.compile(opts.pattern)
            found = [
                (t, p)
                for t, n in sizes.items()
                if not t.startswith(INTERNAL_PREFIX) and pattern.fullmatch(t)
                for p in range(n)
            ]
        else:
            found = [(t, p) for t, p in opts.assigned if p < sizes.get(t, 0)]
        return sorted(found)

    def missing(self) -> list[str]:
        """Named topics (subscribe) or partitions (assign) that do not exist."""
        sizes = self.topic_sizes()
        if self.opts.strategy == "subscribe":
            return [f"topic '{t}'" for t in self.opts.topics if t not in sizes]
        if self.opts.strategy == "assign":
            return [
                f"partition {t}-{p}" if t in sizes else f"topic '{t}'"
                for t, p in self.opts.assigned
                if p >= sizes.get(t, 0)
            ]
        return []

    def check_exists(self) -> None:
        """Unknown topics with failOnDataLoss=true are an error before any work starts;
        with false the query waits for them and reads them from earliest."""
        if not self.opts.fail_on_data_loss:
            return
        gone = self.missing()
        if gone:
            listed = ", ".join(dict.fromkeys(gone))
            raise OptionError(
                f"The source's {self.opts.subscription()} names {listed}, which does not exist "
                f"on {self.opts.bootstrap} (failOnDataLoss is true). Create it first, fix the "
                "name, or set failOnDataLoss to false to wait for it."
            )

    # ------------------------------------------------------------------ offsets

    def list_offsets(self, tps: list[TP], sentinel: int) -> dict[TP, int]:
        """Earliest (-2) or latest (-1: the high watermark) offset of each partition."""
        return self._offsets_for_times({tp: sentinel for tp in tps})

    def earliest(self, tps: list[TP]) -> dict[TP, int]:
        return self.list_offsets(tps, EARLIEST)

    def latest(self, tps: list[TP]) -> dict[TP, int]:
        return self.list_offsets(tps, LATEST)

    def _offsets_for_times(self, query: dict[TP, int]) -> dict[TP, int]:
        """ListOffsets, retried (fetchOffset.numRetries times, fetchOffset.retryIntervalMs
        apart) while a partition has no leader yet or is moving."""
        from confluent_kafka import KafkaException, TopicPartition

        if not query:
            return {}
        request = [TopicPartition(t, p, ts) for (t, p), ts in sorted(query.items())]
        for attempt in range(self.opts.fetch_retries + 1):
            try:
                answer = self.consumer.offsets_for_times(request, timeout=METADATA_TIMEOUT_S)
            except KafkaException as exc:
                failed = [(exc.args[0] if exc.args else exc, "ListOffsets")]
            else:
                failed = [(tp.error, f"{tp.topic}-{tp.partition}") for tp in answer if tp.error]
                if not failed:
                    return {(tp.topic, tp.partition): tp.offset for tp in answer}
            error, where = failed[0]
            retriable = (
                getattr(error, "retriable", lambda: False)()
                or getattr(error, "code", lambda: None)() in _TRANSIENT
            )
            if not retriable or attempt == self.opts.fetch_retries:
                raise RuntimeError(
                    f"ListOffsets on {self.opts.bootstrap} failed for {where}: {error}"
                )
            time.sleep(self.opts.fetch_retry_interval_ms / 1000)
            self.topic_sizes()  # librdkafka routes by its metadata cache: refresh it
        raise AssertionError("unreachable")

    def by_timestamp(self, stamps: dict[TP, int], is_start: bool) -> dict[TP, int]:
        """The first offset at or after each timestamp. None such: for an end, the
        latest offset; for a start, startingOffsetsByTimestampStrategy says."""
        found = self._offsets_for_times(stamps)
        absent = [tp for tp, off in found.items() if off < 0]
        if absent and is_start and self.opts.timestamp_strategy == "error":
            where = ", ".join(f"{t}-{p} (timestamp {stamps[(t, p)]})" for t, p in absent)
            raise OptionError(
                f"No record at or after the starting timestamp in {where}. Use an earlier "
                "timestamp, or set startingOffsetsByTimestampStrategy to 'latest' to start "
                "those partitions at their latest offset."
            )
        if absent:
            found.update(self.latest(absent))
        return found

    def resolve(self, spec: OffsetSpec, tps: list[TP], name: str) -> dict[TP, int]:
        """Offsets for `tps` from a starting/ending spec (`name` for messages)."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            return self.by_timestamp({tp: spec.timestamp for tp in tps}, name.startswith("start"))
        given = from_json(spec.offsets)
        _check_covers(name, set(given), set(tps))
        if spec.kind == "timestamps":
            return self.by_timestamp(given, name.startswith("start"))
        resolved = dict(given)
        for sentinel in (EARLIEST, LATEST):
            pending = [tp for tp, off in given.items() if off == sentinel]
            resolved.update(self.list_offsets(pending, sentinel))
        return resolved


def _check_covers(name: str, given: set[TP], assigned: set[TP]) -> None:
    """Spark's rule: specific offsets must name exactly the partitions read."""
    if given == assigned:
        return

    def show(tps: set[TP]) -> str:
        return ", ".join(f"{t}-{p}" for t, p in sorted(tps)) or "none"

    raise OptionError(
        f"Option '{name}' must give an offset for every partition the query reads, and only "
        f"those (use -2 for earliest, -1 for latest). Missing: {show(assigned - given)}; "
        f"not read by this query: {show(given - assigned)}."
    )
