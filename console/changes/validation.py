"""Input rules, checked before anything is sent: Kafka's topic-name rules and its
topic config types and ranges, quota keys and values."""

from __future__ import annotations

import re

from cluster_client.errors import OpError

TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
MAX_PARTITIONS = 10_000  # a topic's partitions, unless settings.QUILL_MAX_PARTITIONS says
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def topic_name(name: str, field: str = "name") -> str:
    name = (name or "").strip()
    if not name:
        raise OpError("A topic needs a name.", field)
    if name in (".", ".."):
        raise OpError("A topic cannot be named '.' or '..'.", field)
    if len(name) > 249:
        raise OpError(f"Topic names are at most 249 characters; this one has {len(name)}.", field)
    if not TOPIC_NAME.match(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise OpError(
            f"Topic names may use only letters, digits, '.', '_' and '-'; "
            f"not {' '.join(repr(c) for c in bad)}.",
            field,
        )
    return name


def max_partitions() -> int:
    """The most partitions a topic may have through the console (creating or growing)."""
    from django.conf import settings

    return getattr(settings, "QUILL_MAX_PARTITIONS", MAX_PARTITIONS)


def whole(value, field: str, low: int, high: int, what: str) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise OpError(f"{what} must be a whole number, not {value!r}.", field) from None
    if not low <= number <= high:
        raise OpError(f"{what} must be between {low:,} and {high:,}; got {number:,}.", field)
    return number


# Kafka's topic configs: name -> (kind, low, high) or (choices, ...).
_L, _I = LONG_MAX, INT_MAX
TOPIC_CONFIGS: dict[str, tuple] = {
    "cleanup.policy": ("list", {"delete", "compact"}),
    "compression.type": ("choice", {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}),
    "compression.gzip.level": ("int", -1, 9),
    "compression.lz4.level": ("int", 1, 17),
    "compression.zstd.level": ("int", -131072, 22),
    "delete.retention.ms": ("long", 0, _L),
    "file.delete.delay.ms": ("long", 0, _L),
    "flush.messages": ("long", 1, _L),
    "flush.ms": ("long", 0, _L),
    "index.interval.bytes": ("int", 0, _I),
    "local.retention.bytes": ("long", -2, _L),
    "local.retention.ms": ("long", -2, _L),
    "max.compaction.lag.ms": ("long", 1, _L),
    "max.message.bytes": ("int", 0, _I),
    "message.downconversion.enable": ("bool",),
    "message.timestamp.after.max.ms": ("long", 0, _L),
    "message.timestamp.before.max.ms": ("long", 0, _L),
    "message.timestamp.difference.max.ms": ("long", 0, _L),
    "message.timestamp.type": ("choice", {"CreateTime", "LogAppendTime"}),
    "min.cleanable.dirty.ratio": ("double", 0.0, 1.0),
    "min.compaction.lag.ms": ("long", 0, _L),
    "min.insync.replicas": ("int", 1, _I),
    "preallocate": ("bool",),
    "retention.bytes": ("long", -1, _L),
    "retention.ms": ("long", -1, _L),
    "segment.bytes": ("int", 14, _I),
    "segment.index.bytes": ("int", 4, _I),
    "segment.jitter.ms": ("long", 0, _L),
    "segment.ms": ("long", 1, _L),
    "unclean.leader.election.enable": ("bool",),
}
# Settings that can lose data: only admins may set them.
DANGEROUS = {("unclean.leader.election.enable", "true")}


def config_value(key: str, raw, field: str | None = None) -> str:
    """The value normalized as Kafka stores it, or OpError naming the key."""
    field = field or f"configs.{key}"
    if key not in TOPIC_CONFIGS:
        raise OpError(f"{key!r} is not a topic config Kafka knows.", field)
    rule = TOPIC_CONFIGS[key]
    value = str(raw).strip()
    kind = rule[0]
    if kind == "bool":
        if value.lower() not in ("true", "false"):
            raise OpError(f"{key} must be true or false, not {value!r}.", field)
        return value.lower()
    if kind == "choice":
        if value not in rule[1]:
            raise OpError(f"{key} must be one of {', '.join(sorted(rule[1]))}.", field)
        return value
    if kind == "list":
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in rule[1]]
        if not items or bad:
            raise OpError(f"{key} must list {' and/or '.join(sorted(rule[1]))}.", field)
        return ",".join(items)
    if kind == "double":
        try:
            number = float(value)
        except ValueError:
            raise OpError(f"{key} must be a number, not {value!r}.", field) from None
        if not rule[1] <= number <= rule[2]:
            raise OpError(f"{key} must be between {rule[1]} and {rule[2]}; got {number}.", field)
        return value
    return str(whole(value, field, rule[1], rule[2], key))


def topic_configs(configs: dict) -> dict[str, str]:
    errors, clean = {}, {}
    for key, raw in (configs or {}).items():
        key = key.strip()
        try:
            clean[key] = config_value(key, raw)
        except OpError as exc:
            errors.update(exc.errors)
    if errors:
        first = next(iter(errors.values()))
        raise OpError(
            first if len(errors) == 1 else f"{len(errors)} configs are invalid.", **errors
        )
    return clean


def parse_config_text(text: str) -> dict[str, str]:
    """key=value lines (blank lines and # comments skipped), as in a properties file."""
    out = {}
    for number, line in enumerate((text or "").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise OpError(f"Line {number} is not key=value: {line!r}.", "configs")
        out[key.strip()] = value.strip()
    return out


QUOTA_KEYS = {
    "producer_byte_rate": "int",
    "consumer_byte_rate": "int",
    "request_percentage": "double",
    "controller_mutation_rate": "double",
}


def quota_values(values: dict) -> dict[str, str]:
    """Quota settings; empty values are dropped (that removes the quota)."""
    clean = {}
    for key, raw in (values or {}).items():
        if raw is None or str(raw).strip() == "":
            continue
        field = f"quotas.{key}"
        if key not in QUOTA_KEYS:
            raise OpError(f"{key!r} is not a quota; use {', '.join(QUOTA_KEYS)}.", field)
        text = str(raw).strip()
        try:
            number = float(text) if QUOTA_KEYS[key] == "double" else int(text)
        except ValueError:
            raise OpError(f"{key} must be a number, not {text!r}.", field) from None
        if number <= 0:
            raise OpError(f"{key} must be greater than 0; got {text}.", field)
        if QUOTA_KEYS[key] == "int" and number > LONG_MAX:
            raise OpError(f"{key} is too large.", field)
        clean[key] = str(number)
    return clean
