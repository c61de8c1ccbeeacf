"""LogConfig: Kafka's topic config names, defaults, validation, broker synonyms."""

from __future__ import annotations

import pytest

from broker.log.config import ConfigSource, LogConfig
from broker.protocol.errors import ErrorCode, KafkaError

LONG_MAX = (1 << 63) - 1


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert c.compression_type == "producer" and c.target_codec is None
    assert c.min_insync_replicas == 1
    assert c.file_delete_delay_ms == 60000
    assert c.unclean_leader_election_enable is False
    assert c.delete_retention_ms == 86400000
    assert c.min_compaction_lag_ms == 0
    assert c.segment_jitter_ms == 0
    assert c.preallocate is False


def test_from_props_parses_types() -> None:
    c = LogConfig.from_props(
        {
            "retention.ms": "-1",
            "cleanup.policy": "compact, delete",
            "message.downconversion.enable": "FALSE",
            "min.cleanable.dirty.ratio": "0.25",
            "compression.type": "zstd",
            "message.timestamp.type": "LogAppendTime",
        }
    )
    assert c.retention_ms == -1
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.message_downconversion_enable is False
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.target_codec == 4
    assert c.log_append_time


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"segment.bytes": "abc"},
            "Invalid value abc for configuration segment.bytes: Not a number of type INT",
        ),
        (
            {"segment.bytes": "10"},
            "Invalid value 10 for configuration segment.bytes: Value must be at least 14",
        ),
        ({"segment.bytes": "4294967296"}, "configuration segment.bytes: Not a number of type INT"),
        ({"retention.ms": "-2"}, "configuration retention.ms: Value must be at least -1"),
        ({"cleanup.policy": "shred"}, "Invalid value shred for configuration cleanup.policy"),
        ({"message.timestamp.type": "Now"}, "String must be one of: CreateTime, LogAppendTime"),
        ({"compression.type": "brotli"}, "configuration compression.type"),
        ({"preallocate": "yes"}, "Expected value to be either true or false"),
        ({"min.cleanable.dirty.ratio": "2"}, "configuration min.cleanable.dirty.ratio"),
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
    ],
)
def test_invalid_values_name_the_key(props: dict, message: str) -> None:
    with pytest.raises(KafkaError) as err:
        LogConfig.from_props(props)
    assert err.value.code == ErrorCode.invalid_config
    assert message in err.value.message


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"retention.ms": "1000", "local.retention.ms": "2000"},
            "Invalid value 2000 for configuration local.retention.ms: "
            "Value must not be more than retention.ms property value: 1000",
        ),
        (
            {"retention.bytes": "100", "local.retention.bytes": "-1"},
            "Invalid value -1 for configuration local.retention.bytes: "
            "Value must not be -1 as retention.bytes value is set as 100.",
        ),
    ],
)
def test_local_retention_is_checked_against_the_total_as_kafka_checks_it(props, message):
    with pytest.raises(KafkaError) as err:
        LogConfig.from_props(props)
    assert err.value.code == ErrorCode.invalid_config
    assert err.value.message == message


def test_local_retention_within_the_total_is_taken_and_the_total_decides():
    config = LogConfig.from_props({"retention.ms": "5000", "local.retention.ms": "1000"})
    assert (config.local_retention_ms, config.retention_ms) == (1000, 5000)
    unlimited = LogConfig.from_props({"retention.ms": "-1", "local.retention.ms": "-1"})
    assert unlimited.local_retention_ms == -1


def test_broker_synonyms_and_priority() -> None:
    broker = LogConfig.from_broker_props(
        {
            "log.retention.hours": "1",
            "log.roll.hours": "2",
            "log.segment.bytes": "1000000",
            "message.max.bytes": "2000",
            "log.index.interval.bytes": "100",
            "log.flush.interval.messages": "7",
            "log.message.timestamp.type": "LogAppendTime",
            "compression.type": "gzip",
            "min.insync.replicas": "2",
            "log.cleanup.policy": "compact",
            "unrelated.key": "whatever",
        }
    )
    assert broker.retention_ms == 3_600_000
    assert broker.segment_ms == 7_200_000
    assert broker.segment_bytes == 1_000_000
    assert broker.max_message_bytes == 2000
    assert broker.index_interval_bytes == 100
    assert broker.flush_messages == 7
    assert broker.message_timestamp_type == "LogAppendTime"
    assert broker.compression_type == "gzip"
    assert broker.min_insync_replicas == 2
    assert broker.cleanup_policy == ("compact",)
    # log.retention.ms beats minutes beats hours
    c = LogConfig.from_broker_props(
        {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "3"}
    )
    assert c.retention_ms == 3
    assert LogConfig.from_broker_props({"log.retention.minutes": "2"}).retention_ms == 120_000
    assert LogConfig.from_broker_props({"log.retention.ms": "-5"}).retention_ms == -1
    with pytest.raises(KafkaError) as err:
        LogConfig.from_broker_props({"log.segment.bytes": "x"})
    assert "log.segment.bytes" in err.value.message


def test_topic_overrides_on_broker_defaults_and_describe() -> None:
    broker = LogConfig.from_broker_props({"log.retention.hours": "1", "log.segment.bytes": "5000"})
    topic = LogConfig.from_props({"retention.ms": "42"}, broker)
    assert topic.retention_ms == 42 and topic.segment_bytes == 5000
    assert topic.to_props() == {"retention.ms": "42"}
    rows = {r.name: r for r in topic.describe()}
    assert rows["retention.ms"].value == "42"
    assert rows["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert not rows["retention.ms"].is_default
    # as Kafka's ConfigHelper: synonyms start at the key's own broker key, log.retention.ms,
    # so log.retention.hours (set, and its default) are not listed
    assert [s[:2] for s in rows["retention.ms"].synonyms] == [("retention.ms", "42")]
    assert rows["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert rows["segment.bytes"].synonyms[0] == (
        "log.segment.bytes",
        "5000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert rows["cleanup.policy"].value == "delete" and rows["cleanup.policy"].is_default
    assert rows["flush.ms"].value == str(LONG_MAX)
    assert "message.timestamp.type" in rows and len(rows) >= 30


def _synonyms(config: LogConfig) -> dict[str, list[tuple[str, str | None, ConfigSource]]]:
    return {r.name: list(r.synonyms) for r in config.describe()}


def test_synonyms_are_kafkas_for_a_broker_without_log_keys() -> None:
    """What Kafka 3's DescribeConfigs lists for a topic without overrides on a broker
    whose server.properties sets no log key."""
    got = _synonyms(LogConfig.from_broker_props({}))
    d = ConfigSource.DEFAULT_CONFIG
    for key in ("retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"):
        assert got[key] == [], key  # their broker key (log.retention.ms, ...) has no default
    assert got["compression.type"] == [("compression.type", "producer", d)]
    assert got["cleanup.policy"] == [("log.cleanup.policy", "delete", d)]
    assert got["segment.bytes"] == [("log.segment.bytes", "1073741824", d)]
    assert got["max.message.bytes"] == [("message.max.bytes", "1048588", d)]
    assert got["leader.replication.throttled.replicas"] == []
    rows = {r.name: r for r in LogConfig().describe()}
    assert rows["retention.ms"].source == d and rows["retention.ms"].is_default


def test_synonyms_start_at_the_keys_own_broker_key() -> None:
    s = ConfigSource.STATIC_BROKER_CONFIG
    d = ConfigSource.DEFAULT_CONFIG
    both = LogConfig.from_broker_props({"log.retention.ms": "5000", "log.retention.hours": "3"})
    assert both.retention_ms == 5000
    assert _synonyms(both)["retention.ms"] == [
        ("log.retention.ms", "5000", s),
        ("log.retention.hours", "3", s),
        ("log.retention.hours", "168", d),
    ]
    hours = LogConfig.from_broker_props({"log.retention.hours": "3", "log.roll.ms": "60000"})
    assert hours.retention_ms == 3 * 3600 * 1000
    assert _synonyms(hours)["retention.ms"] == []
    assert {r.name: r for r in hours.describe()}["retention.ms"].source == d
    assert _synonyms(hours)["segment.ms"] == [
        ("log.roll.ms", "60000", s),
        ("log.roll.hours", "168", d),
    ]


@pytest.mark.parametrize(
    "version",
    ["0.8.0", "0.9.0", "0.10.0", "0.10.0.0", "0.10.0-IV1", "0.10.2-IV0", "1.0", "2.8.1", "3.0-IV1"],
)
def test_message_format_version_takes_kafkas_versions(version: str) -> None:
    """Kafka 3.x's MetadataVersion strings, old ones too (KIP-724: accepted, ignored)."""
    assert LogConfig.from_props({"message.format.version": version}).message_format_version == (
        version
    )
    broker = LogConfig.from_broker_props({"log.message.format.version": version})
    assert broker.message_format_version == version


@pytest.mark.parametrize("version", ["0.7", "9.9", "0.10.0-IV2", "3.0-IV9", "abc", "latest"])
def test_message_format_version_refuses_what_kafka_refuses(version: str) -> None:
    with pytest.raises(KafkaError) as info:
        LogConfig.from_props({"message.format.version": version})
    assert info.value.code == ErrorCode.invalid_config
    assert f"Version `{version}` is not a valid version" in info.value.message
