"""Dynamic broker configs (Kafka's KIP-226, ``DynamicBrokerConfig``).

A broker's settings come from, most specific first: its own dynamic configs in
ZooKeeper (``/config/brokers/<id>``), the cluster-wide dynamic defaults
(``/config/brokers/<default>``), its static ``server.properties``, Kafka's defaults.

Which keys may change at run time is Kafka's list, less what Quill cannot honour:

- the topic defaults (``DynamicLogConfig``): the first broker synonym of each topic
  config (log.retention.ms, log.segment.bytes, message.max.bytes, log.cleanup.policy,
  min.insync.replicas, compression.type, ...; not log.retention.hours nor
  log.message.format.version, which Kafka keeps read-only);
- the cleaner's log.cleaner.backoff.ms, log.cleaner.dedupe.buffer.size and
  log.cleaner.io.max.bytes.per.second;
- the connection limits max.connections, max.connections.per.ip(.overrides), and
  max.connection.creation.rate (also per listener, KIP-612);
- num.recovery.threads.per.data.dir (the next log recovery);
- num.replica.fetchers (the fetcher pool is resized at once);
- the replication throttles leader/follower.replication.throttled.rate;
- per broker only, each TLS listener's keystore and truststore
  (``listener.name.<listener>.ssl.keystore.location`` and the rest of
  SECURITY_DYNAMIC): checked by loading them, applied to new connections
  (``dynamic_listener``). Their passwords are stored encrypted with the static
  ``password.encoder.secret`` (``security.password_encoder``), refused without it.

A read-only key is refused as Kafka refuses it; a key Kafka can change and Quill does
not implement is refused with the reason; a key that is no broker config at all is
stored, as Kafka stores it, and has no effect.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..log.config import (
    BROKER_SYNONYMS,
    TOPIC_CONFIG_KEYS,
    ConfigSource,
    ConfigType,
    LogConfig,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..security import password_encoder
from .config import KEYS, UNSUPPORTED
from .connection_quotas import ConfigValueError, parse_ip_overrides

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"
LONG_MAX = 2**63 - 1

THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
#: Kafka's DynamicLogConfig.ReconfigurableConfigs
LOG_DYNAMIC = frozenset(syns[0][0] for syns in BROKER_SYNONYMS.values()) - {
    "log.message.format.version"
}
CLEANER_DYNAMIC = frozenset(
    {
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
    }
)
SOCKET_DYNAMIC = frozenset(
    {
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
    }
)
#: Kafka's DynamicBrokerConfig.ClusterLevelListenerConfigs that Quill honours per listener
LISTENER_RATE = "max.connection.creation.rate"
DYNAMIC = (
    LOG_DYNAMIC
    | CLEANER_DYNAMIC
    | SOCKET_DYNAMIC
    | {"num.recovery.threads.per.data.dir", "num.replica.fetchers"}
    | set(THROTTLES)
)

#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only per listener
#: (listener.name.<listener>.<key>)
SECURITY_DYNAMIC = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
#: Kafka's DynamicBrokerConfig.PerBrokerConfigs: never at the cluster-default level
PER_BROKER = SECURITY_DYNAMIC | {
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "ssl.client.auth",
    "ssl.endpoint.identification.algorithm",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
}
#: keys Kafka changes at run time and Quill does not: refused, with why
NOT_IMPLEMENTED = {
    **UNSUPPORTED,
    "log.cleaner.threads": (
        "the log cleaner is synchronous, one log per pass from the log manager's tick; "
        "passes do not run concurrently, so there is no pool to size"
    ),
    "log.cleaner.io.buffer.size": "the log cleaner reads whole segments",
    "log.cleaner.io.buffer.load.factor": "the log cleaner's key map is a dict",
    "replica.alter.log.dirs.io.max.bytes.per.second": "replicas do not move between log dirs",
    "metric.reporters": "metrics are served by the Prometheus endpoint only",
    "listeners": "listeners are opened at start-up only",
    "advertised.listeners": "listeners are registered at start-up only",
    "listener.security.protocol.map": "listeners are opened at start-up only",
    "ssl.client.auth": "listeners' TLS settings are read at start-up only",
    "ssl.endpoint.identification.algorithm": "TLS settings are read at start-up only",
    "sasl.enabled.mechanisms": "SASL mechanisms are set at start-up only",
    "sasl.mechanism.inter.broker.protocol": "SASL mechanisms are set at start-up only",
}
_LOG_KEYS = frozenset(k for syns in BROKER_SYNONYMS.values() for k, _ in syns)
#: every Kafka broker key Quill knows: those not dynamic are read-only
KNOWN = frozenset(KEYS) | _LOG_KEYS | set(THROTTLES) | set(NOT_IMPLEMENTED)
LISTENER_PREFIX = "listener.name."


def listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<key>`` -> (listener, key) for the listener keys Quill
    changes at run time (keystores, truststores, the creation rate); None otherwise."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    listener, _, base = key[len(LISTENER_PREFIX) :].partition(".")
    return (listener, base) if base in SECURITY_DYNAMIC or base == LISTENER_RATE else None


def listener_ssl_key(key: str) -> tuple[str, str] | None:
    """``listener.name.<listener>.<ssl key>`` -> (listener, ssl key); None otherwise."""
    found = listener_key(key)
    return found if found and found[1] in SECURITY_DYNAMIC else None


def is_dynamic(key: str) -> bool:
    return key in DYNAMIC or listener_key(key) is not None


def _base(key: str) -> str:
    found = listener_key(key)
    return found[1] if found else key


def listener_rates(props: Mapping[str, str]) -> dict[str, int]:
    """listener name (upper case, as the broker names it) -> its creation rate limit."""
    out = {}
    for key, raw in props.items():
        found = listener_key(key)
        if found and found[1] == LISTENER_RATE:
            out[found[0].upper()] = typed(LISTENER_RATE, raw)
    return out


def is_password(key: str) -> bool:
    spec = KEYS.get(_base(key))
    return spec is not None and spec.sensitive


def encode_passwords(new: Mapping[str, str], secret: str | None) -> dict[str, str]:
    """Kafka's DynamicBrokerConfig.toPersistentProps: what ZooKeeper stores."""
    out = dict(new)
    for key in sorted(k for k in new if is_password(k)):
        if not secret:
            raise _invalid("Password encoder secret not configured")
        out[key] = password_encoder.encode(secret, new[key])
    return out


def decode_passwords(stored: Mapping[str, str], secret: str | None) -> dict[str, str]:
    """Kafka's fromPersistentProps: a password this secret cannot decode is dropped."""
    out = dict(stored)
    for key in sorted(k for k in stored if is_password(k)):
        try:
            if not secret:
                raise password_encoder.PasswordEncoderError("password.encoder.secret is unset")
            out[key] = password_encoder.decode(secret, stored[key])
        except password_encoder.PasswordEncoderError as exc:
            log.error("dynamic password config %s dropped: %s", key, exc)
            del out[key]
    return out


def _scala_set(keys) -> str:
    return f"Set({', '.join(sorted(keys))})"


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_config, message)


def validate(new: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: raises INVALID_CONFIG."""
    keys = set(new)
    read_only = keys & KNOWN - DYNAMIC - SECURITY_DYNAMIC - set(NOT_IMPLEMENTED)
    if read_only:
        raise _invalid(f"Cannot update these configs dynamically: {_scala_set(read_only)}")
    unprefixed = keys & SECURITY_DYNAMIC
    if unprefixed:
        raise _invalid(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_scala_set(unprefixed)}"
        )
    for key in sorted(keys):
        if key in DYNAMIC or _base(key) == LISTENER_RATE:
            typed(key, new[key])
    if not per_broker:
        broker_only = (keys & PER_BROKER) | {
            k for k in keys if k.startswith(LISTENER_PREFIX) and _base(k) != LISTENER_RATE
        }
        if broker_only:
            raise _invalid(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_scala_set(broker_only)}"
            )
    for key in sorted(keys):
        if key in NOT_IMPLEMENTED or (
            key.startswith(LISTENER_PREFIX) and listener_key(key) is None
        ):
            why = NOT_IMPLEMENTED.get(key, "listeners' settings are read at start-up only")
            raise _invalid(f"Cannot update {key} dynamically in Quill: {why}")


def typed(key: str, raw: str) -> Any:
    """One dynamic key's value, parsed and range-checked (INVALID_CONFIG otherwise)."""
    if key in THROTTLES:
        return _number(key, raw, 0, "LONG")
    if _base(key) == LISTENER_RATE:
        return _number(key, raw, 0, "INT")
    spec = KEYS.get(key)
    if spec is None or key in LOG_DYNAMIC:
        return raw  # checked by LogConfig as a whole (check_log_defaults)
    if key == "max.connections.per.ip.overrides":
        try:
            return parse_ip_overrides(raw)
        except ConfigValueError as exc:
            raise _invalid(f"Invalid value {raw} for configuration {key}: {exc}") from None
    if spec.parse is float:
        return _positive_double(key, raw)
    return _number(key, raw, spec.minimum, "INT")


def _positive_double(key: str, raw: str) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        value = None
    if value is None or value != value:  # not a number, or NaN
        raise _invalid(f"Invalid value {raw} for configuration {key}: Not a number of type DOUBLE")
    if value <= 0:
        raise _invalid(f"Invalid value {raw} for configuration {key}: Value must be above 0")
    return value


def _number(key: str, raw: str, minimum: int | None, tname: str) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise _invalid(
            f"Invalid value {raw} for configuration {key}: Not a number of type {tname}"
        ) from None
    if minimum is not None and value < minimum:
        raise _invalid(
            f"Invalid value {raw} for configuration {key}: Value must be at least {minimum}"
        )
    return value


class DynamicBrokerConfig:
    """This broker's dynamic configs on top of its static ones: the effective values,
    their sources, and the layers LogConfig and DescribeConfigs read."""

    def __init__(self, broker_id: int, static: Mapping[str, str]) -> None:
        self.broker_id = str(broker_id)
        self.static = dict(static)
        self.per_broker: dict[str, str] = {}
        self.default: dict[str, str] = {}

    @property
    def secret(self) -> str | None:
        return self.static.get("password.encoder.secret") or None

    # -- layers -------------------------------------------------------------------------
    def layers(self) -> list[tuple[ConfigSource, dict[str, str]]]:
        """The dynamic levels, most specific first (what LogConfig.from_broker_props takes)."""
        return [
            (ConfigSource.DYNAMIC_BROKER_CONFIG, self.per_broker),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.default),
        ]

    def merged(self) -> dict[str, str]:
        """server.properties with the dynamic values over it (most specific wins)."""
        out = dict(self.static)
        out.update(self.default)
        out.update(self.per_broker)
        return out

    def get(self, key: str) -> tuple[str | None, ConfigSource]:
        """(value, source) of a key: per-broker, cluster default, static, else None."""
        for source, props in (
            *self.layers(),
            (ConfigSource.STATIC_BROKER_CONFIG, self.static),
        ):
            if key in props:
                return props[key], source
        return None, ConfigSource.DEFAULT_CONFIG

    def value(self, key: str) -> Any:
        """The typed effective value of a dynamic key from KEYS (its default if unset)."""
        raw, _source = self.get(key)
        return typed(key, kafka_default(key) if raw is None else raw)

    def log_config(self) -> LogConfig:
        return LogConfig.from_broker_props(self.static, self.layers())

    # -- updates --------------------------------------------------------------------------
    def entity_of(self, name: str) -> str | None:
        """ZooKeeper entity name -> "broker" or "default" (None: another broker's)."""
        if name == DEFAULT_ENTITY:
            return "default"
        return "broker" if name == self.broker_id else None

    def update(self, entity: str, config: Mapping[str, str]) -> bool:
        """Take one level's new content from ZooKeeper; False if unchanged or refused.
        Only keys Quill applies are kept (unknown keys stay in ZooKeeper, unused)."""
        level = self.entity_of(entity)
        if level is None:
            return False
        kept = {k: v for k, v in config.items() if k in DYNAMIC or _base(k) == LISTENER_RATE}
        if level == "broker":  # listeners' keystores: per broker only
            listener_keys = {k: v for k, v in config.items() if listener_ssl_key(k)}
            kept.update(decode_passwords(listener_keys, self.secret))
        current = self.per_broker if level == "broker" else self.default
        if kept == current:
            return False
        try:
            for key, raw in kept.items():
                typed(key, raw)
            self.check_combined(level, kept)
        except KafkaError as exc:
            log.error("ignoring dynamic config of brokers/%s: %s", entity, exc.message)
            return False
        if level == "broker":
            self.per_broker = kept
        else:
            self.default = kept
        return True

    def check_combined(self, level: str, config: Mapping[str, str]) -> None:
        """What this level would give with the others, checked as a whole: the topic
        defaults (LogConfig) and the connection limits (INVALID_CONFIG)."""
        kept = {k: v for k, v in config.items() if k in DYNAMIC}
        per_broker = kept if level == "broker" else self.per_broker
        default = kept if level == "default" else self.default
        LogConfig.from_broker_props(
            self.static,
            [
                (ConfigSource.DYNAMIC_BROKER_CONFIG, per_broker),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, default),
            ],
        )
        merged = {**self.static, **default, **per_broker}
        per_ip = typed("max.connections.per.ip", merged.get("max.connections.per.ip", "1"))
        overrides = merged.get("max.connections.per.ip.overrides", "")
        if per_ip == 0 and not typed("max.connections.per.ip.overrides", overrides):
            raise _invalid(
                "Invalid value 0 for configuration max.connections.per.ip: it needs "
                "max.connections.per.ip.overrides, or no client could connect"
            )

    # -- DescribeConfigs ------------------------------------------------------------------
    def describe(self, keys: set[str] | None, synonyms: bool, default_level: bool) -> list[dict]:
        """Kafka's ZkAdminManager rows for a BROKER resource: every broker key for this
        broker, or (``default_level``, the empty resource name) the cluster defaults set."""
        levels = self.layers()[1:] if default_level else self.layers()
        levels.append((ConfigSource.STATIC_BROKER_CONFIG, self.static))
        if default_level:
            names = sorted(self.default)
        else:
            listener_keys = {k for k in (*self.per_broker, *self.default) if listener_key(k)}
            names = sorted(ALL_KEYS | listener_keys)
        rows = []
        for key in names:
            if keys is not None and key not in keys:
                continue
            found = _synonyms(key, levels)
            sensitive = is_password(key)
            if sensitive:
                found = [(n, None, s) for n, _v, s in found]
            value, source = (
                (found[0][1], found[0][2]) if found else (None, ConfigSource.DEFAULT_CONFIG)
            )
            rows.append(
                {
                    "name": key,
                    "value": value,
                    "read_only": not is_dynamic(key),
                    "config_source": int(source),
                    "is_sensitive": sensitive,
                    "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in found]
                    if synonyms
                    else [],
                    "config_type": int(_config_type(_base(key))),
                    "documentation": KEYS[_base(key)].doc if _base(key) in KEYS else None,
                }
            )
        return rows


ALL_KEYS = frozenset(KEYS) | _LOG_KEYS | set(THROTTLES)


def _synonym_group(key: str) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms."""
    if key != "log.flush.scheduler.interval.ms":
        for syns in BROKER_SYNONYMS.values():
            group = [name for name, _factor in syns]
            if key in group:
                return group
    return [key]


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(value)
    if isinstance(value, float) and "e" in repr(value):  # Java's 1.7976931348623157E308
        mantissa, exponent = repr(value).split("e")
        return f"{mantissa}E{int(exponent)}"
    return str(value)


def kafka_default(key: str) -> str | None:
    """Kafka's default of a broker key, as a string (None: no default)."""
    if key in KEYS:
        default = KEYS[key].default
        return None if default is None else _fmt(default)
    for topic_key, syns in BROKER_SYNONYMS.items():
        name, factor = syns[-1]
        if key == name:
            default = LogConfig().get(topic_key)
            if factor != 1 and isinstance(default, int) and default % factor == 0:
                default //= factor
            return _fmt(default)
    return None


def _synonyms(key: str, levels) -> list[tuple[str, str | None, ConfigSource]]:
    """Kafka's ConfigHelper.configSynonyms: each synonym at each level, level by level,
    then Kafka's defaults; those before the key itself dropped."""
    group = _synonym_group(key)
    found = [(n, props[n], source) for source, props in levels for n in group if n in props]
    found += [
        (n, d, ConfigSource.DEFAULT_CONFIG) for n in group if (d := kafka_default(n)) is not None
    ]
    while found and found[0][0] != key:
        found.pop(0)
    return found


def _config_type(key: str) -> ConfigType:
    for topic_key, syns in BROKER_SYNONYMS.items():
        if key in (name for name, _ in syns):
            ctype = TOPIC_CONFIG_KEYS[topic_key].ctype
            return ConfigType.INT if key.endswith((".hours", ".minutes")) else ctype
    if key in THROTTLES:
        return ConfigType.LONG
    spec = KEYS[key]
    if spec.sensitive:
        return ConfigType.PASSWORD
    if isinstance(spec.default, bool):
        return ConfigType.BOOLEAN
    if isinstance(spec.default, list):
        return ConfigType.LIST
    if isinstance(spec.default, float):
        return ConfigType.DOUBLE
    if isinstance(spec.default, int):
        return (
            ConfigType.LONG if key.endswith(".ms") or spec.default > 2**31 - 1 else ConfigType.INT
        )
    return ConfigType.STRING


def is_list(key: str) -> bool:
    """Whether IncrementalAlterConfigs may APPEND to / SUBTRACT from a broker key."""
    return key in ALL_KEYS and _config_type(key) == ConfigType.LIST
