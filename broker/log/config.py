"""Topic-level log configuration: Kafka's names, types, defaults and validation.

``LogConfig`` holds one value per topic config key (attribute = key with dots as
underscores, e.g. ``segment.bytes`` -> ``segment_bytes``). It is built from:

- Kafka's own defaults (``LogConfig()``),
- the broker's ``server.properties`` (``LogConfig.from_broker_props``), through
  Kafka's synonym table (``log.retention.hours`` -> ``retention.ms`` and so on),
- a topic's overrides (``LogConfig.from_props(overrides, defaults=broker_default)``).

It remembers where each value came from so ``describe()`` can answer
DescribeConfigs with Kafka's config sources and synonyms.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from broker.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BROKER_SYNONYMS",
    "ConfigDescription",
    "ConfigSource",
    "LogConfig",
    "TOPIC_CONFIG_KEYS",
]

LONG_MAX = (1 << 63) - 1
LONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
INT_MIN = -(1 << 31)

#: Records.LOG_OVERHEAD (offset + size prefix) added to 1 MiB, as Kafka does.
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12
WEEK_MS = 7 * 24 * 60 * 60 * 1000

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: codec id (record batch attributes & 7) per compression.type value
CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class ConfigSource(enum.IntEnum):
    """DescribeConfigs config_source values (Kafka's ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ConfigType(enum.IntEnum):
    """DescribeConfigs config_type values (Kafka's ConfigDef.Type ids)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigDescription(NamedTuple):
    """One row of DescribeConfigs for a topic."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    config_type: ConfigType
    #: (name, value, source), most specific first, like Kafka's synonyms list
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]
    read_only: bool = False
    is_sensitive: bool = False


def _invalid(key: str, value: object, reason: str) -> KafkaError:
    return KafkaError(
        ErrorCode.invalid_config, f"Invalid value {value} for configuration {key}: {reason}"
    )


# --- parsers: str (or already-typed value) -> typed value ------------------------------


def _parse_int(lo: int, hi: int, tname: str) -> Callable[[str, Any], int]:
    def parse(key: str, raw: Any) -> int:
        if isinstance(raw, bool):
            raise _invalid(key, raw, f"Not a number of type {tname}")
        if isinstance(raw, int):
            value = raw
        else:
            text = str(raw).strip()
            if not re.fullmatch(r"[+-]?\d+", text):
                raise _invalid(key, raw, f"Not a number of type {tname}")
            value = int(text)
        if not lo <= value <= hi:
            raise _invalid(key, raw, f"Not a number of type {tname}")
        return value

    return parse


_INT = _parse_int(INT_MIN, INT_MAX, "INT")
_LONG = _parse_int(LONG_MIN, LONG_MAX, "LONG")


def _BOOL(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise _invalid(key, raw, "Expected value to be either true or false")


def _DOUBLE(key: str, raw: Any) -> float:
    try:
        return float(str(raw).strip()) if not isinstance(raw, float) else raw
    except ValueError:
        raise _invalid(key, raw, "Not a number of type DOUBLE") from None


def _STRING(key: str, raw: Any) -> str:
    return str(raw).strip()


def _LIST(key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, (list, tuple)):
        return tuple(str(x).strip() for x in raw)
    text = str(raw).strip()
    return tuple(p.strip() for p in text.split(",")) if text else ()


# --- validators ---------------------------------------------------------------------


def _at_least(minimum: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value < minimum:
            raise _invalid(key, _fmt(value), f"Value must be at least {minimum}")

    return check


def _between(lo: float, hi: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value < lo:
            raise _invalid(key, _fmt(value), f"Value must be at least {lo}")
        if value > hi:
            raise _invalid(key, _fmt(value), f"Value must be no more than {hi}")

    return check


def _one_of(*choices: str) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if value not in choices:
            raise _invalid(key, value, "String must be one of: " + ", ".join(choices))

    return check


def _list_of(*choices: str) -> Callable[[str, Any], None]:
    def check(key: str, value: tuple[str, ...]) -> None:
        for item in value:
            if item.lower() not in choices:
                raise _invalid(key, item, "String must be one of: " + ", ".join(choices))

    return check


def _throttled_replicas(key: str, value: tuple[str, ...]) -> None:
    if value == ("*",) or all(re.fullmatch(r"\d+:\d+", v) for v in value):
        return
    raise _invalid(
        key,
        ",".join(value),
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


#: Kafka 3.x's MetadataVersion: each release and how many inter-broker protocol
#: versions ("-IVn") it had; message.format.version takes any of them (KIP-724: with
#: inter.broker.protocol.version 3.0 or later, which is ours, the value is accepted and
#: ignored: the log is always written in format v2).
_METADATA_VERSIONS = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1,
    "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2,
    "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4,
    "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5,
}  # fmt: skip
_VERSION_STRINGS = set(_METADATA_VERSIONS) | {
    f"{release}-IV{n}" for release, count in _METADATA_VERSIONS.items() for n in range(count)
}


def _version(key: str, value: str) -> None:
    """Kafka's MetadataVersion.fromVersionString: "0.10.0", "0.10.0-IV1", "2.8", and
    longer spellings cut to the release ("0.10.0.0", "2.8.1")."""
    segments = value.split(".")
    wanted = 3 if value.startswith("0.") else 2
    short = value if len(segments) <= wanted else ".".join(segments[:wanted])
    if short not in _VERSION_STRINGS:
        raise _invalid(key, value, f"Version `{value}` is not a valid version")


class _Key(NamedTuple):
    ctype: ConfigType
    parse: Callable[[str, Any], Any]
    check: Callable[[str, Any], None] | None = None


_T = ConfigType
#: Kafka's topic config definitions (LogConfig.CONFIG), in alphabetical order; the
#: defaults are the LogConfig dataclass field defaults.
TOPIC_CONFIG_KEYS: dict[str, _Key] = {
    "cleanup.policy": _Key(_T.LIST, _LIST, _list_of("compact", "delete")),
    "compression.gzip.level": _Key(_T.INT, _INT, None),  # 1..9 or -1: checked in _check_combined
    "compression.lz4.level": _Key(_T.INT, _INT, _between(1, 17)),
    "compression.type": _Key(_T.STRING, _STRING, _one_of(*COMPRESSION_TYPES)),
    "compression.zstd.level": _Key(_T.INT, _INT, _between(-131072, 22)),
    "delete.retention.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "file.delete.delay.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "flush.messages": _Key(_T.LONG, _LONG, _at_least(1)),
    "flush.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "follower.replication.throttled.replicas": _Key(_T.LIST, _LIST, _throttled_replicas),
    "index.interval.bytes": _Key(_T.INT, _INT, _at_least(0)),
    "leader.replication.throttled.replicas": _Key(_T.LIST, _LIST, _throttled_replicas),
    "local.retention.bytes": _Key(_T.LONG, _LONG, _at_least(-2)),
    "local.retention.ms": _Key(_T.LONG, _LONG, _at_least(-2)),
    "max.compaction.lag.ms": _Key(_T.LONG, _LONG, _at_least(1)),
    "max.message.bytes": _Key(_T.INT, _INT, _at_least(0)),
    "message.downconversion.enable": _Key(_T.BOOLEAN, _BOOL),
    "message.format.version": _Key(_T.STRING, _STRING, _version),
    "message.timestamp.after.max.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "message.timestamp.before.max.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "message.timestamp.difference.max.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "message.timestamp.type": _Key(_T.STRING, _STRING, _one_of("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": _Key(_T.DOUBLE, _DOUBLE, _between(0, 1)),
    "min.compaction.lag.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "min.insync.replicas": _Key(_T.INT, _INT, _at_least(1)),
    "preallocate": _Key(_T.BOOLEAN, _BOOL),
    "remote.storage.enable": _Key(_T.BOOLEAN, _BOOL),
    "retention.bytes": _Key(_T.LONG, _LONG),
    "retention.ms": _Key(_T.LONG, _LONG, _at_least(-1)),
    # LegacyRecord.RECORD_OVERHEAD_V0 = 14 is Kafka's floor for segment.bytes
    "segment.bytes": _Key(_T.INT, _INT, _at_least(14)),
    "segment.index.bytes": _Key(_T.INT, _INT, _at_least(4)),
    "segment.jitter.ms": _Key(_T.LONG, _LONG, _at_least(0)),
    "segment.ms": _Key(_T.LONG, _LONG, _at_least(1)),
    "unclean.leader.election.enable": _Key(_T.BOOLEAN, _BOOL),
}

_HOURS = 3600 * 1000
_MINUTES = 60 * 1000
#: topic key -> broker keys in priority order, with the multiplier to milliseconds
#: (Kafka's ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS).
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOURS)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOURS)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTES),
        ("log.retention.hours", _HOURS),
    ),
    "max.message.bytes": (("message.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "preallocate": (("log.preallocate", 1),),
    "message.format.version": (("log.message.format.version", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.downconversion.enable": (("log.message.downconversion.enable", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}


def _fmt(value: Any) -> str:
    """A value as Kafka prints it in DescribeConfigs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def _unset(raw: Any) -> bool:
    return raw is None or (isinstance(raw, str) and raw.strip() == "")


def _shown(key: str, broker_key: str, raw: Any) -> str:
    try:
        return _fmt(TOPIC_CONFIG_KEYS[key].parse(broker_key, raw))
    except KafkaError:  # an overridden level's value: shown as written
        return str(raw)


def _layered_synonyms(
    layers: Sequence[tuple[ConfigSource, Mapping[str, Any]]],
) -> dict[str, tuple[tuple[str, str, ConfigSource], ...]]:
    """Per topic key, every broker synonym set at each level, level by level (Kafka's
    ConfigHelper.configSynonyms order)."""
    out: dict[str, tuple[tuple[str, str, ConfigSource], ...]] = {}
    for key, synonyms in BROKER_SYNONYMS.items():
        found = tuple(
            (broker_key, _shown(key, broker_key, props[broker_key]), source)
            for source, props in layers
            for broker_key, _factor in synonyms
            if not _unset(props.get(broker_key))
        )
        if found:
            out[key] = found
    return out


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _default_synonym(key: str) -> tuple[str, str | None, ConfigSource]:
    """Kafka names a topic config's default by its broker key, in that key's unit
    (``retention.ms`` -> ``log.retention.hours=168``): of several broker keys, only the
    last has a default in Kafka's KafkaConfig (log.retention.ms, log.roll.ms, ... are null)."""
    default = getattr(_KAFKA_DEFAULTS, _attr(key))
    name, factor = BROKER_SYNONYMS[key][-1]
    if factor != 1 and isinstance(default, int) and default % factor == 0:
        default = default // factor
    return name, _fmt(default), ConfigSource.DEFAULT_CONFIG


def _broker_synonyms(
    key: str, layered: tuple[tuple[str, str, ConfigSource], ...]
) -> list[tuple[str, str | None, ConfigSource]]:
    """Kafka's ConfigHelper.configSynonyms for a topic key: the broker keys set at each
    level (``layered``: per-broker dynamic, cluster-default dynamic, server.properties),
    then the broker default, all dropped up to the first named by
    the key's own broker key (``log.retention.ms`` for ``retention.ms``). That drop, made
    for listener overrides, also drops ``log.retention.hours``: a broker that sets no
    ``log.retention.ms`` lists no synonym for ``retention.ms``, as Kafka."""
    if key not in BROKER_SYNONYMS:
        return []  # Kafka's TopicConfigSynonyms has none (the throttled replicas lists)
    found: list[tuple[str, str | None, ConfigSource]] = list(layered)
    found.append(_default_synonym(key))
    primary = BROKER_SYNONYMS[key][0][0]
    for i, (name, _value, _source) in enumerate(found):
        if name == primary:
            return found[i:]
    return []


@dataclass(frozen=True)
class LogConfig:
    """Per-topic log settings; attribute names are Kafka's keys with ``_`` for ``.``.
    Immutable, so the values derived from them are computed once per instance (the
    append path asks for some on every batch)."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_type: str = "producer"
    compression_zstd_level: int = 3
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    index_interval_bytes: int = 4096
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_bytes: int = -2
    local_retention_ms: int = -2
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    preallocate: bool = False
    remote_storage_enable: bool = False
    retention_bytes: int = -1
    retention_ms: int = WEEK_MS
    segment_bytes: int = 1024 * 1024 * 1024
    segment_index_bytes: int = 10 * 1024 * 1024
    segment_jitter_ms: int = 0
    segment_ms: int = WEEK_MS
    unclean_leader_election_enable: bool = False

    #: topic keys set as topic overrides (source DYNAMIC_TOPIC_CONFIG), with raw values
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: topic key -> the (broker key, raw value) pairs server.properties sets for it, in
    #: Kafka's priority order (the first one is the value)
    broker_values: Mapping[str, tuple[tuple[str, str], ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: topic key -> its broker synonyms set at each level, Kafka's order (per-broker
    #: dynamic, cluster-default dynamic, static server.properties): (key, value, source)
    broker_synonyms: Mapping[str, tuple[tuple[str, str, ConfigSource], ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    # --- construction ------------------------------------------------------------------

    @classmethod
    def from_props(cls, props: Mapping[str, Any], defaults: LogConfig | None = None) -> LogConfig:
        """Topic overrides (Kafka topic keys -> values, usually strings) on top of
        ``defaults`` (the broker's default LogConfig, or Kafka's defaults).

        Raises KafkaError(INVALID_CONFIG) naming the key for unknown keys, values of the
        wrong type and values out of range.
        """
        base = defaults if defaults is not None else cls()
        values: dict[str, Any] = {}
        overrides = dict(base.overrides)
        for key, raw in props.items():
            spec = TOPIC_CONFIG_KEYS.get(key)
            if spec is None:
                raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
            value = spec.parse(key, raw)
            if spec.check is not None:
                spec.check(key, value)
            values[_attr(key)] = value
            overrides[key] = _fmt(value)
        config = dataclasses.replace(base, overrides=overrides, **values)
        config._check_combined()
        return config

    @classmethod
    def from_broker_props(
        cls,
        broker_props: Mapping[str, Any],
        dynamic: Sequence[tuple[ConfigSource, Mapping[str, Any]]] = (),
    ) -> LogConfig:
        """The default LogConfig of a broker, from its server.properties (Kafka's
        broker-level names such as log.segment.bytes, log.retention.hours,
        message.max.bytes), using the first synonym that is set. ``dynamic``: the
        dynamic broker configs over them, most specific first (KIP-226)."""
        layers = [*dynamic, (ConfigSource.STATIC_BROKER_CONFIG, broker_props)]
        merged: dict[str, Any] = {}
        for _source, props in reversed(layers):
            merged.update(props)
        values: dict[str, Any] = {}
        used: dict[str, tuple[tuple[str, str], ...]] = {}
        for key, synonyms in BROKER_SYNONYMS.items():
            spec = TOPIC_CONFIG_KEYS[key]
            found = []
            for broker_key, factor in synonyms:
                raw = merged.get(broker_key)
                if _unset(raw):
                    continue
                value = spec.parse(broker_key, raw)
                found.append((broker_key, _fmt(value)))
                if len(found) > 1:
                    continue  # the first one set is the value; the others are synonyms
                if factor != 1:
                    value = value * factor
                if key == "retention.ms" and value < 0:
                    value = -1  # KafkaConfig.logRetentionTimeMillis: negative means unlimited
                if spec.check is not None:
                    spec.check(broker_key, value)
                values[_attr(key)] = value
            if found:
                used[key] = tuple(found)
        config = dataclasses.replace(
            cls(), broker_values=used, broker_synonyms=_layered_synonyms(layers), **values
        )
        config._check_combined()
        return config

    def _check_combined(self) -> None:
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise KafkaError(
                ErrorCode.invalid_config,
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms})"
                f" > max.compaction.lag.ms ({self.max_compaction_lag_ms})",
            )
        gzip = self.compression_gzip_level
        if gzip != -1 and not 1 <= gzip <= 9:
            raise _invalid(
                "compression.gzip.level", gzip, "Value must be between 1 and 9, or -1 (default)"
            )
        self._check_local_retention()
        if self.remote_storage_enable:  # Kafka's words when remote.log.storage is off
            raise KafkaError(
                ErrorCode.invalid_config,
                "Tiered Storage functionality is disabled in the broker. Topic cannot be "
                "configured with remote log storage (remote.storage.enable=true).",
            )
        if self.preallocate:
            raise KafkaError(
                ErrorCode.invalid_config,
                "preallocate=true is not supported: segment files grow as records are "
                "appended (set preallocate/log.preallocate to false or leave it out).",
            )

    def _check_local_retention(self) -> None:
        """local.retention.ms/bytes bound the local tier of a tiered topic; -2 means "as
        retention.ms/bytes". With no remote tier (remote.storage.enable is refused) the
        local log is the whole log, so retention.ms/bytes decide what is kept, as in
        Kafka with remote storage off; a value is still checked against its total as
        Kafka's LogConfig checks it, so no setting is taken that could never be honoured."""
        for local_key, total_key in (
            ("local.retention.ms", "retention.ms"),
            ("local.retention.bytes", "retention.bytes"),
        ):
            local, total = self.get(local_key), self.get(total_key)
            if total == -1 or local == -2:
                continue
            if local == -1:
                raise _invalid(
                    local_key,
                    local,
                    f"Value must not be -1 as {total_key} value is set as {total}.",
                )
            if local > total:
                raise _invalid(
                    local_key,
                    local,
                    f"Value must not be more than {total_key} property value: {total}",
                )

    # --- derived settings (Kafka's LogConfig getters) ----------------------------------

    def get(self, key: str) -> Any:
        """The typed value of a Kafka topic config key."""
        if key not in TOPIC_CONFIG_KEYS:
            raise KeyError(key)
        return getattr(self, _attr(key))

    @cached_property
    def compact(self) -> bool:
        return "compact" in (p.lower() for p in self.cleanup_policy)

    @cached_property
    def delete(self) -> bool:
        return "delete" in (p.lower() for p in self.cleanup_policy)

    @cached_property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @cached_property
    def timestamp_before_max_ms(self) -> int:
        """message.timestamp.before.max.ms, falling back to the deprecated
        message.timestamp.difference.max.ms while the former is at its default."""
        if self.message_timestamp_before_max_ms != LONG_MAX:
            return self.message_timestamp_before_max_ms
        return self.message_timestamp_difference_max_ms

    @cached_property
    def timestamp_after_max_ms(self) -> int:
        if self.message_timestamp_after_max_ms != LONG_MAX:
            return self.message_timestamp_after_max_ms
        return self.message_timestamp_difference_max_ms

    @cached_property
    def max_segment_ms(self) -> int:
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @cached_property
    def target_codec(self) -> int | None:
        """The codec id appends must be stored with, or None to keep the producer's."""
        return CODEC_IDS.get(self.compression_type)

    @property
    def compression_level(self) -> int | None:
        """compression.<codec>.level of compression.type's codec (KIP-390), used when
        the broker recompresses; None where the codec has no levels."""
        return {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)

    # --- DescribeConfigs -----------------------------------------------------------------

    def describe(self) -> list[ConfigDescription]:
        """One row per topic key: value, Kafka config source, and synonyms."""
        rows = []
        for key, spec in TOPIC_CONFIG_KEYS.items():
            synonyms = _broker_synonyms(key, self.broker_synonyms.get(key, ()))
            if key in self.overrides:
                synonyms.insert(0, (key, self.overrides[key], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            rows.append(
                ConfigDescription(
                    name=key,
                    value=_fmt(self.get(key)),
                    source=source,
                    is_default=source == ConfigSource.DEFAULT_CONFIG,
                    config_type=spec.ctype,
                    synonyms=tuple(synonyms),
                )
            )
        return rows

    def to_props(self) -> dict[str, str]:
        """The topic overrides as strings (what ZooKeeper's /config/topics holds)."""
        return dict(self.overrides)

    def values(self) -> dict[str, str]:
        """Every topic key with its effective value as a string."""
        return {key: _fmt(self.get(key)) for key in TOPIC_CONFIG_KEYS}


_KAFKA_DEFAULTS = LogConfig()
