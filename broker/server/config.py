"""Broker configuration: a ``server.properties`` file with Kafka's key names.

Values come from, in rising precedence: Kafka's defaults, the properties file,
``QUILL_``-prefixed environment variables (``QUILL_LOG_DIRS`` -> ``log.dirs``) and
``--override key=value`` on the command line. Unknown keys are warned about (Kafka
does the same); an invalid value refuses start-up with a message naming the key.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..log.config import BROKER_SYNONYMS, LogConfig
from ..protocol.errors import KafkaError
from ..zk.security import ZkSecurityError, read_client_credentials
from .config_keys import KEYS, ConfigError, parse_listener
from .connection_quotas import ConfigValueError, parse_ip_overrides
from .listener_security import check_security
from .listeners import Listeners

__all__ = ["KEYS", "UNSUPPORTED", "BrokerConfig", "ConfigError", "parse_listener"]

log = logging.getLogger(__name__)

#: broker keys that set topic defaults (read by LogConfig.from_broker_props)
_LOG_KEYS = {broker_key for synonyms in BROKER_SYNONYMS.values() for broker_key, _ in synonyms}

#: Kafka broker keys Quill knows and refuses, with the reason said at start-up.
UNSUPPORTED = {
    "num.network.threads": "the broker serves every connection on one asyncio event loop",
    "num.io.threads": "requests are handled on the broker's asyncio event loop",
    "background.threads": "background tasks run on the broker's asyncio event loop",
}


def _parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka's files use: key=value or key: value, # comments."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """``QUILL_LOG_DIRS=/x`` -> ``{"log.dirs": "/x"}``; only keys we know, plus a warning."""
    result = {}
    for name, value in environ.items():
        if not name.startswith("QUILL_") or name.startswith("QUILL_STATE"):
            continue
        key = name[len("QUILL_") :].lower().replace("_", ".")
        if key not in KEYS and "quill." + key in KEYS:  # QUILL_METRICS_PORT: quill.metrics.port
            key = "quill." + key
        if key in KEYS:
            result[key] = value
    return result


class BrokerConfig:
    """Typed, validated broker settings. ``cfg["log.segment.bytes"]`` or ``cfg.broker_id``."""

    def __init__(self, raw: Mapping[str, str]) -> None:
        self.raw = dict(raw)
        self.values: dict[str, Any] = {}
        for key, spec in KEYS.items():
            if key in raw:
                try:
                    value = spec.parse(raw[key])
                except (ValueError, TypeError) as exc:
                    raise ConfigError(
                        f"Invalid value {raw[key]!r} for configuration {key}: {exc}"
                    ) from None
                if spec.minimum is not None and isinstance(value, int) and value < spec.minimum:
                    raise ConfigError(
                        f"Invalid value {value} for configuration {key}: "
                        f"Value must be at least {spec.minimum}"
                    )
                self.values[key] = value
            else:
                self.values[key] = spec.default
        self.unknown = sorted(
            k for k in set(raw) - set(KEYS) - set(_LOG_KEYS) if not k.startswith("listener.name.")
        )  # listener.name.* keys are checked by listener_security.py, refused if unknown
        self._refuse_unsupported()
        self._validate()

    def _validate(self) -> None:
        if self.values["broker.id"] < 0:
            raise ConfigError("Missing required configuration broker.id (a number >= 0)")
        if not self.values["zookeeper.connect"]:
            raise ConfigError("Missing required configuration zookeeper.connect (host:port)")
        ts_type = self.values["log.message.timestamp.type"]
        if ts_type not in ("CreateTime", "LogAppendTime"):
            raise ConfigError(
                f"Invalid value {ts_type} for configuration log.message.timestamp.type: "
                "must be CreateTime or LogAppendTime"
            )
        self.endpoints = Listeners.from_config(self)
        check_security(self)
        self._validate_connection_limits()
        self._validate_log_defaults()
        rate = self.values["log.cleaner.io.max.bytes.per.second"]
        if not rate > 0:  # the cleaner divides by it
            raise ConfigError(
                f"Invalid value {rate} for configuration log.cleaner.io.max.bytes.per.second: "
                "Value must be above 0"
            )
        self._validate_authorizer()
        self.zookeeper_credentials = self._zookeeper_credentials()

    def _zookeeper_credentials(self):
        """The broker's SASL login to ZooKeeper (None: anonymous); refused at start-up
        when the JAAS file is unusable or zookeeper.set.acl=true has no login to name
        the znodes' owner (as Kafka refuses it)."""
        jaas = self.values["java.security.auth.login.config"]
        try:
            creds = None
            if jaas:
                creds = read_client_credentials(jaas, self.values["zookeeper.sasl.clientconfig"])
        except ZkSecurityError as exc:
            raise ConfigError(str(exc)) from None
        if self.values["zookeeper.set.acl"] and creds is None:
            raise ConfigError(
                "zookeeper.set.acl is true, but java.security.auth.login.config names no "
                "JAAS file with a ZooKeeper client login; set it or set zookeeper.set.acl=false"
            )
        return creds

    def _validate_authorizer(self) -> None:
        from ..security.authorizer import AclAuthorizer, AuthorizerConfigError  # noqa: PLC0415

        try:
            AclAuthorizer.from_config(self)
        except AuthorizerConfigError as exc:
            raise ConfigError(str(exc)) from None

    def _refuse_unsupported(self) -> None:
        """Kafka keys we know and do not implement: refused, so nobody relies on them."""
        for key, why in UNSUPPORTED.items():
            if key in self.raw:
                raise ConfigError(f"Unsupported configuration {key}: {why}; remove it")

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """Kafka: zookeeper.connection.timeout.ms, else zookeeper.session.timeout.ms."""
        ms = self.values["zookeeper.connection.timeout.ms"]
        return ms if ms is not None else self.values["zookeeper.session.timeout.ms"]

    def _validate_log_defaults(self) -> None:
        """The topic defaults server.properties sets (log.*, compression.*): checked here
        so a bad one stops start-up naming its key."""
        try:
            LogConfig.from_broker_props(self.raw)
        except KafkaError as exc:
            raise ConfigError(exc.message) from None

    def _validate_connection_limits(self) -> None:
        key = "max.connections.per.ip.overrides"
        try:
            self.ip_overrides = parse_ip_overrides(self.values[key])
        except ConfigValueError as exc:
            raise ConfigError(f"Invalid value for configuration {key}: {exc}") from None
        if self.values["max.connections.per.ip"] == 0 and not self.ip_overrides:
            raise ConfigError(
                "Invalid value 0 for configuration max.connections.per.ip: it needs "
                "max.connections.per.ip.overrides, or no client could connect"
            )
        delay, idle = (
            self.values["connection.failed.authentication.delay.ms"],
            self.values["connections.max.idle.ms"],
        )
        if delay >= idle:
            raise ConfigError(
                f"Invalid value {delay} for configuration connection.failed.authentication."
                f"delay.ms: it must be less than connections.max.idle.ms ({idle})"
            )

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_dirs(self) -> list[str]:
        return self.values["log.dirs"] or self.values["log.dir"]

    @property
    def listeners(self) -> list[str]:
        return self.values["listeners"]

    @property
    def retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self.values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    @property
    def flush_ms(self) -> int:
        v = self.values
        ms = v["log.flush.interval.ms"]
        return ms if ms is not None else v["log.flush.scheduler.interval.ms"]

    @classmethod
    def load(
        cls,
        path: str | Path | None,
        overrides: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        raw: dict[str, str] = {}
        if path is not None:
            try:
                raw.update(_parse_properties(Path(path).read_text()))
            except OSError as exc:
                raise ConfigError(f"Cannot read config file {path}: {exc.strerror}") from None
        raw.update(env_overrides(os.environ if environ is None else environ))
        raw.update(overrides or {})
        cfg = cls(raw)
        for key in cfg.unknown:
            log.warning("Unknown configuration %s=%s is ignored", key, raw[key])
        return cfg
