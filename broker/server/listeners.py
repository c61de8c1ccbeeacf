"""Named listeners, as Kafka configures them.

``listeners`` and ``advertised.listeners`` are ``NAME://host:port`` lists; each name maps
to a security protocol through ``listener.security.protocol.map`` (so ``INTERNAL`` and
``EXTERNAL`` can both be PLAINTEXT, as in Confluent's and Bitnami's compose files), and
brokers talk to each other on ``inter.broker.listener.name`` (default: the listener named
after ``security.inter.broker.protocol``, PLAINTEXT). Clients get, in Metadata and
FindCoordinator answers, the endpoints of the listener they connected on.

All four protocols are served: PLAINTEXT, SSL (TLS, optionally with client
certificates), SASL_PLAINTEXT and SASL_SSL; what each needs (keystore, mechanisms, JAAS
configs) is read and checked by ``listener_security.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..zk.znodes import SECURITY_PROTOCOL_IDS
from .config_keys import ConfigError, parse_listener

if TYPE_CHECKING:
    from .config import BrokerConfig


@dataclass(frozen=True)
class EndPoint:
    """One listener: its name, address and security protocol."""

    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def uri(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, str]:
    """``INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT`` -> {"INTERNAL": "PLAINTEXT", ...}."""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOL_IDS:
            raise ValueError(
                f"expected LISTENER_NAME:PROTOCOL pairs with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOL_IDS)}; got {item!r}"
            )
        if name in mapping:
            raise ValueError(f"listener name {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def _protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    text = cfg["listener.security.protocol.map"]
    try:
        return parse_protocol_map(text)
    except ValueError as exc:
        raise ConfigError(
            f"Invalid value {text} for configuration listener.security.protocol.map: {exc}"
        ) from None


def _endpoints(cfg: BrokerConfig, key: str, uris: list[str]) -> list[EndPoint]:
    mapping = _protocol_map(cfg)
    endpoints: list[EndPoint] = []
    for uri in uris:
        name, host, port = parse_listener(uri)
        name = name.upper()
        if name not in mapping:
            raise ConfigError(
                f"Listener {name} in {key} ({uri}) is not defined in "
                f"listener.security.protocol.map ({_show(mapping)})"
            )
        if any(e.name == name for e in endpoints):
            raise ConfigError(f"Each listener must have a different name: {key} has {name} twice")
        endpoints.append(EndPoint(name, host, port, mapping[name]))
    return endpoints


def _show(mapping: dict[str, str]) -> str:
    return ",".join(f"{n}:{p}" for n, p in mapping.items())


@dataclass(frozen=True)
class Listeners:
    """What a broker listens on, what it registers, and which listener brokers use."""

    bind: list[EndPoint]
    advertised: list[EndPoint]
    inter_broker: str

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> Listeners:
        bind = _endpoints(cfg, "listeners", cfg.listeners)
        if not bind:
            raise ConfigError("listeners must name at least one listener, e.g. PLAINTEXT://:9092")
        ports = [e.port for e in bind if e.port]
        if len(ports) != len(set(ports)):
            raise ConfigError(
                f"Each listener must have a different port: listeners={cfg.listeners}"
            )
        advertised_uris = cfg.values["advertised.listeners"] or cfg.listeners
        advertised = _endpoints(cfg, "advertised.listeners", advertised_uris)
        names = [e.name for e in bind]
        for e in advertised:
            if e.name not in names:
                raise ConfigError(
                    f"advertised.listeners listener {e.name} is not in listeners "
                    f"({', '.join(names)}): a broker advertises only what it listens on"
                )
            if e.host == "0.0.0.0":
                raise ConfigError(
                    f"advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 "
                    f"({e.uri}); set advertised.listeners to a routable host"
                )
        return cls(bind, advertised, _inter_broker_listener(cfg, [e.name for e in advertised]))

    def registered(self, bound_ports: dict[str, int]) -> list[EndPoint]:
        """The advertised endpoints with port 0 replaced by the port actually bound."""
        return [
            EndPoint(e.name, e.host, e.port or bound_ports[e.name], e.security_protocol)
            for e in self.advertised
        ]


def _inter_broker_listener(cfg: BrokerConfig, advertised: list[str]) -> str:
    name = cfg["inter.broker.listener.name"]
    protocol = cfg["security.inter.broker.protocol"]
    if name is not None and protocol is not None:
        raise ConfigError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set"
        )
    if name is None:
        protocol = (protocol or "PLAINTEXT").upper()
        if protocol not in SECURITY_PROTOCOL_IDS:
            raise ConfigError(
                f"Invalid value {protocol} for configuration security.inter.broker.protocol: "
                f"must be one of {', '.join(SECURITY_PROTOCOL_IDS)}"
            )
        name, key = protocol, "security.inter.broker.protocol"
    else:
        name, key = name.upper(), "inter.broker.listener.name"
    if name not in advertised:
        raise ConfigError(
            f"{key} must name a listener defined in advertised.listeners; {name} is not one of "
            f"{', '.join(advertised)} (set inter.broker.listener.name)"
        )
    return name
