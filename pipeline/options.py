"""Options of the `quill` data source, with Spark's Kafka connector names, checked
before any work starts.

Everything here is pure: parsing and validation of option strings, no network. The
checks that need the cluster (does the topic exist?) live in `pipeline.offsets`.
Every mistake raises `OptionError` with a sentence that names the option, what was
given and what would be right.

Option names are case-insensitive, as in Spark. `kafka.*` options go to librdkafka
without the prefix (`kafka.security.protocol` -> `security.protocol`).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from cluster_client.client_security import librdkafka_config

EARLIEST = -2  # Kafka's ListOffsets sentinels, as Spark's JSON offsets use them
LATEST = -1

STRATEGIES = ("subscribe", "subscribePattern", "assign")

# Options the source understands (Spark's Kafka connector's names).
SOURCE_OPTIONS = (
    "kafka.bootstrap.servers",
    *STRATEGIES,
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
)
SINK_OPTIONS = (
    "kafka.bootstrap.servers",
    "topic",
    "deliveryGuarantee",
    "queryId",
)
# Options Spark itself hands to every sink and source (DataStreamWriter, DataFrameWriter).
SPARK_OPTIONS = ("checkpointLocation", "path", "queryName")

# Kafka consumer/producer settings the connector manages itself; Spark rejects the same.
MANAGED_KAFKA = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "offsets live in Spark's checkpoint, never in the group",
    "key.deserializer": "keys are always read as bytes (cast them in the query)",
    "value.deserializer": "values are always read as bytes (cast them in the query)",
    "key.serializer": "write a binary or string 'key' column instead",
    "value.serializer": "write a binary or string 'value' column instead",
    "interceptor.classes": "interceptors are a Java client feature",
    "enable.idempotence": "the sink always writes with an idempotent producer",
}

DELIVERY_GUARANTEES = ("exactly-once", "at-least-once")
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default


class OptionError(ValueError):
    """A bad option, told as a sentence a user can act on."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: `earliest`, `latest`, per-partition `offsets`
    ({topic: {partition: offset}}, -2/-1 meaning earliest/latest), one `timestamp` for
    every partition, or per-partition `timestamps`."""

    kind: str
    offsets: dict = field(default_factory=dict)
    timestamp: int | None = None

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return self.kind
        if self.kind == "timestamp":
            return f"timestamp {self.timestamp}"
        return json.dumps(self.offsets)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    strategy: str  # one of STRATEGIES
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str = ""  # subscribePattern
    assigned: tuple[tuple[str, int], ...] = ()  # assign
    starting: OffsetSpec | None = None  # None: the default for batch or streaming
    ending: OffsetSpec | None = None
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_retries: int = 3  # Spark's fetchOffset.numRetries
    fetch_retry_interval_ms: int = 1000  # Spark's fetchOffset.retryIntervalMs
    kafka: dict = field(default_factory=dict)  # librdkafka settings, prefix stripped

    def starting_for(self, streaming: bool) -> OffsetSpec:
        """Spark's defaults: streaming queries start at latest, batch ones at earliest."""
        if self.starting is not None:
            return self.starting
        return OffsetSpec("latest" if streaming else "earliest")

    def subscription(self) -> str:
        if self.strategy == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.strategy == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assigned)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None = None
    delivery: str = "exactly-once"  # streaming only; batch writes are at-least-once
    query_id: str | None = None  # else Spark's (the id kept in the query's checkpoint)
    kafka: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- parsing


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_names(opts: dict[str, str], known: tuple[str, ...], what: str) -> None:
    allowed = {name.lower(): name for name in (*known, *SPARK_OPTIONS)}
    for key in opts:
        if key.startswith("kafka."):
            setting = key[len("kafka.") :]
            if setting in MANAGED_KAFKA:
                raise OptionError(
                    f"Kafka option 'kafka.{setting}' is not supported: {MANAGED_KAFKA[setting]}."
                )
            continue
        if key not in allowed:
            close = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f" Did you mean '{allowed[close[0]]}'?" if close else ""
            raise OptionError(
                f"Unknown option '{key}' for the quill {what}.{hint} "
                f"Known options: {', '.join(n for n in known)}, and kafka.* for the client."
            )


def _kafka_settings(opts: dict[str, str]) -> tuple[str, dict]:
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError(
            "Option 'kafka.bootstrap.servers' must be set, e.g. "
            ".option('kafka.bootstrap.servers', 'host1:9092,host2:9092')."
        )
    extra = librdkafka_config()  # the environment's credentials; kafka.* options win
    extra |= {
        k[len("kafka.") :]: v
        for k, v in opts.items()
        if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
    }
    return bootstrap, extra


def parse_bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be 'true' or 'false', not {raw!r}.")
    return value == "true"


def parse_positive_int(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(
            f"Option '{name}' must be a positive whole number, not {raw!r}."
        ) from None
    if value <= 0:
        raise OptionError(f"Option '{name}' must be a positive whole number, not {raw!r}.")
    return value


def _non_negative_int(opts: dict[str, str], name: str, default: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    if not raw.strip().isdigit():
        raise OptionError(f"Option '{name}' must be a whole number >= 0, not {raw!r}.")
    return int(raw)


def _json_object(name: str, raw: str, example: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise OptionError(
            f"Option '{name}' is not valid JSON ({exc}); expected something like {example}, "
            f"got {raw!r}."
        ) from None
    if not isinstance(value, dict) or not value:
        raise OptionError(
            f"Option '{name}' must be a non-empty JSON object like {example}, got {raw!r}."
        )
    return value


def _partition_map(name: str, raw: str, example: str, value_kind: str) -> dict:
    """{"topic": {"0": n, ...}} -> {topic: {0: n}} with checked types."""
    parsed = _json_object(name, raw, example)
    result: dict[str, dict[int, int]] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(
                f"Option '{name}': topic {topic!r} must map partitions to {value_kind}s, "
                f"like {example}; got {json.dumps(parts)}."
            )
        result[topic] = {}
        for part, value in parts.items():
            try:
                partition = int(part)
            except ValueError:
                raise OptionError(
                    f"Option '{name}': partition {part!r} of topic {topic!r} is not a number."
                ) from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(
                    f"Option '{name}': the {value_kind} for {topic}-{part} must be a whole "
                    f"number, got {json.dumps(value)}."
                )
            result[topic][partition] = value
    return result


def parse_offsets(name: str, raw: str) -> OffsetSpec:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    example = '{"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}'
    if not text.startswith("{"):
        raise OptionError(
            f"Option '{name}' must be 'earliest', 'latest' or JSON offsets like {example}; "
            f"got {raw!r}."
        )
    offsets = _partition_map(name, text, example, "offset")
    for topic, parts in offsets.items():
        for partition, offset in parts.items():
            if offset < EARLIEST:
                raise OptionError(
                    f"Option '{name}': offset {offset} for {topic}-{partition} is not valid; "
                    "use an offset >= 0, or -2 for earliest and -1 for latest."
                )
    return OffsetSpec("offsets", offsets)


def parse_timestamps(name: str, raw: str) -> OffsetSpec:
    example = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
    stamps = _partition_map(name, raw, example, "timestamp")
    for topic, parts in stamps.items():
        for partition, ts in parts.items():
            if ts < 0:
                raise OptionError(
                    f"Option '{name}': timestamp {ts} for {topic}-{partition} is negative; "
                    "timestamps are milliseconds since the epoch."
                )
    return OffsetSpec("timestamps", stamps)


def parse_timestamp(name: str, raw: str) -> OffsetSpec:
    try:
        ts = int(raw.strip())
    except ValueError:
        raise OptionError(
            f"Option '{name}' must be milliseconds since the epoch, like 1700000000000; "
            f"got {raw!r}."
        ) from None
    if ts < 0:
        raise OptionError(f"Option '{name}' must not be negative, got {raw!r}.")
    return OffsetSpec("timestamp", timestamp=ts)


def _position(opts: dict[str, str], which: str) -> OffsetSpec | None:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets (Spark's order)."""
    by_time = opts.get(f"{which}timestamp")
    if by_time is not None:
        return parse_timestamp(f"{which}Timestamp", by_time)
    by_partition = opts.get(f"{which}offsetsbytimestamp")
    if by_partition is not None:
        return parse_timestamps(f"{which}OffsetsByTimestamp", by_partition)
    raw = opts.get(f"{which}offsets")
    return None if raw is None else parse_offsets(f"{which}Offsets", raw)


def _strategy(opts: dict[str, str]) -> dict:
    given = [s for s in STRATEGIES if s.lower() in opts]
    if len(given) != 1:
        got = ", ".join(given) if given else "none of them"
        raise OptionError(
            "Give exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
            f"(got {got})."
        )
    strategy = given[0]
    raw = opts[strategy.lower()].strip()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError(
                f"Option 'subscribe' must list one or more topics, comma-separated; got {raw!r}."
            )
        return {"strategy": strategy, "topics": topics}
    if strategy == "subscribePattern":
        if not raw:
            raise OptionError("Option 'subscribePattern' must be a non-empty regular expression.")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(
                f"Option 'subscribePattern' is not a valid regular expression ({exc}): {raw!r}."
            ) from None
        return {"strategy": strategy, "pattern": raw}
    example = '{"topicA":[0,1],"topicB":[2,4]}'
    parsed = _json_object("assign", raw, example)
    assigned = []
    for topic, parts in parsed.items():
        ok = isinstance(parts, list) and parts
        ok = ok and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts)
        if not ok:
            raise OptionError(
                f"Option 'assign': topic {topic!r} must map to a list of partition numbers, "
                f"like {example}; got {json.dumps(parts)}."
            )
        assigned.extend((topic, p) for p in sorted(set(parts)))
    return {"strategy": strategy, "assigned": tuple(assigned)}


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Everything the source needs, checked; batch/streaming rules in `check_source_mode`."""
    opts = _lower(options)
    _check_names(opts, SOURCE_OPTIONS, "source")
    bootstrap, kafka = _kafka_settings(opts)
    strategy = _strategy(opts)
    ts_strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if ts_strategy not in ("error", "latest"):
        raise OptionError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not {ts_strategy!r}."
        )
    poll = parse_positive_int(opts, "kafkaConsumer.pollTimeoutMs")
    return SourceOptions(
        bootstrap=bootstrap,
        starting=_position(opts, "starting"),
        ending=_position(opts, "ending"),
        timestamp_strategy=ts_strategy,
        max_offsets_per_trigger=parse_positive_int(opts, "maxOffsetsPerTrigger"),
        min_partitions=parse_positive_int(opts, "minPartitions"),
        max_records_per_partition=parse_positive_int(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=parse_bool(opts, "failOnDataLoss", True),
        include_headers=parse_bool(opts, "includeHeaders", False),
        poll_timeout_ms=poll or DEFAULT_POLL_TIMEOUT_MS,
        fetch_retries=_non_negative_int(opts, "fetchOffset.numRetries", 3),
        fetch_retry_interval_ms=parse_positive_int(opts, "fetchOffset.retryIntervalMs") or 1000,
        kafka=kafka,
        **strategy,
    )


def _offsets_json_values(spec: OffsetSpec | None) -> set[int]:
    if spec is None or spec.kind != "offsets":
        return set()
    return {o for parts in spec.offsets.values() for o in parts.values()}


def check_source_mode(opts: SourceOptions, streaming: bool) -> None:
    """The rules that differ between batch and streaming queries (as Spark's)."""
    if streaming:
        if opts.ending is not None:
            raise OptionError(
                "Options 'endingOffsets', 'endingTimestamp' and 'endingOffsetsByTimestamp' "
                "are for batch queries (spark.read); a streaming query reads until it is stopped."
            )
        return
    _reject_in_batch(opts.starting, "latest", LATEST, "startingOffsets", "it would read nothing")
    _reject_in_batch(opts.ending, "earliest", EARLIEST, "endingOffsets", "it would end at once")


def _reject_in_batch(spec: OffsetSpec | None, kind: str, sentinel: int, name: str, why: str):
    if spec is not None and (spec.kind == kind or sentinel in _offsets_json_values(spec)):
        raise OptionError(
            f"Option '{name}' cannot be '{kind}' (or {sentinel}) for a batch query: {why}. "
            "Use 'earliest', 'latest', offsets, or a timestamp."
        )


def parse_sink_options(options: Mapping[str, str], streaming: bool) -> SinkOptions:
    opts = _lower(options)
    _check_names(opts, SINK_OPTIONS, "sink")
    bootstrap, kafka = _kafka_settings(opts)
    delivery = opts.get("deliveryguarantee", "exactly-once").strip().lower()
    if delivery not in DELIVERY_GUARANTEES:
        raise OptionError(
            f"Option 'deliveryGuarantee' must be 'exactly-once' or 'at-least-once', "
            f"not {delivery!r}."
        )
    if not streaming and "deliveryguarantee" in opts and delivery == "exactly-once":
        raise OptionError(
            "Option 'deliveryGuarantee' = 'exactly-once' is for streaming writes; a batch "
            "write (df.write) is at-least-once, as in Spark's Kafka sink. Rerun failed batch "
            "jobs into a fresh topic, or use writeStream."
        )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("Option 'topic' must not be empty.")
    query_id = (opts.get("queryid") or "").strip() or None
    if query_id and "/" in query_id:
        raise OptionError(
            f"Option 'queryId' must not contain '/' (the exactly-once sink's record ids "
            f"use it as a separator): {query_id!r}."
        )
    return SinkOptions(
        bootstrap=bootstrap,
        topic=topic.strip() if topic else None,
        delivery=delivery,
        query_id=query_id,
        kafka=kafka,
    )
