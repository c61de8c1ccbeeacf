"""What each listener asks of its connections: TLS, SASL, or neither, from Kafka's keys.

Every ``ssl.*`` and ``sasl.*`` key may be set for one listener as
``listener.name.<listener>.<key>`` (the listener name lower-cased, as Kafka writes it),
and the JAAS login module of a mechanism only that way:
``listener.name.sasl_ssl.plain.sasl.jaas.config=...PlainLoginModule required
user_alice="alice-secret";``. PLAIN's users come from that config; SCRAM's from
ZooKeeper (``/config/users/<user>``, through the CredentialCache). Start-up is refused,
naming the key, for a mechanism Quill lacks (GSSAPI), PLAIN without a JAAS config, a TLS
listener without a PEM keystore, and an unknown ``listener.name.*`` key.
OAUTHBEARER (``oauthbearer_listener.py``) validates unsecured JWTs (the JAAS options of
``listener.name.<listener>.oauthbearer.sasl.jaas.config``) or, with Kafka's
OAuthBearerValidatorCallbackHandler as the listener's
``oauthbearer.sasl.server.callback.handler.class``, signed ones against a JWKS.
``connections.max.reauth.ms`` (KIP-368) may be set per listener and per mechanism:
``listener.name.<listener>.<mechanism>.connections.max.reauth.ms`` wins over
``listener.name.<listener>.connections.max.reauth.ms``, which wins over the broker's.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cryptography import x509

from ..client.oauthbearer import OAuthConfigError, UnsecuredLogin
from ..client.security import ClientSecurity
from ..security.authenticator import SaslServerAuthenticator
from ..security.credential_cache import CredentialCache
from ..security.jaas import JaasConfig, parse_jaas_config
from ..security.oauthbearer import OAuthBearerServer, TokenValidator
from ..security.principal import KafkaPrincipal
from ..security.principal_mapping import SslPrincipalMapper
from ..security.reauth import SaslSession, SaslStats
from ..security.sasl_plain import PlainServer
from ..security.sasl_scram import ScramServer
from ..security.scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from ..security.ssl_factory import SslConfigError, broker_client_context, server_context
from .config_keys import KEYS, ConfigError
from .oauthbearer_listener import UNSECURED_HANDLER, oauth_validator

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .listeners import EndPoint

log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
#: keys a listener may override with listener.name.<listener>.<key>
LISTENER_KEYS = {
    k
    for k in KEYS
    if k.startswith(("ssl.", "sasl.")) and k != "sasl.mechanism.inter.broker.protocol"
}
JAAS_SUFFIX = ".sasl.jaas.config"
REAUTH_KEY = "connections.max.reauth.ms"
HANDLER_KEY = "sasl.server.callback.handler.class"
#: keys a listener may set for one mechanism: listener.name.<listener>.<mechanism>.<key>
MECHANISM_KEYS = {
    JAAS_SUFFIX[1:],
    REAUTH_KEY,
    HANDLER_KEY,
    *(k for k in KEYS if k.startswith("sasl.oauthbearer.")),
}


def listener_prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def listener_value(cfg: BrokerConfig, listener: str, key: str) -> Any:
    """The listener's own value of ``key`` if set, else the broker-wide one."""
    raw = cfg.raw.get(listener_prefix(listener) + key)
    if raw is None:
        return cfg[key]
    try:
        return KEYS[key].parse(raw)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"Invalid value {raw!r} for configuration {listener_prefix(listener)}{key}: {exc}"
        ) from None


def listener_ssl_settings(cfg: BrokerConfig, listener: str) -> dict[str, Any]:
    """The listener's ``ssl.*`` values (its own where set, else the broker's)."""
    return {k: listener_value(cfg, listener, k) for k in LISTENER_KEYS if k.startswith("ssl.")}


def jaas_config(cfg: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    key = f"{listener_prefix(listener)}{mechanism.lower()}{JAAS_SUFFIX}"
    text = cfg.raw.get(key)
    if text is None:
        return None
    try:
        return parse_jaas_config(text)
    except ValueError as exc:
        raise ConfigError(f"Invalid value for configuration {key}: {exc}") from None


@dataclass
class ListenerSasl:
    """A SASL listener's mechanisms; ``server(m)`` starts one exchange."""

    listener: str
    enabled: list[str]
    plain_users: dict[str, str]
    credentials: CredentialCache
    reauth_ms: dict[str, int] = field(default_factory=dict)  # mechanism -> its value
    stats: SaslStats = field(default_factory=SaslStats)
    oauth: TokenValidator | None = None  # OAUTHBEARER's token validator

    def server(self, mechanism: str):
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(self.oauth)
        return ScramServer(mechanism, self.credentials)

    def max_reauth_ms(self, mechanism: str) -> int:
        return self.reauth_ms.get(mechanism, 0)


@dataclass
class ListenerSecurity:
    """Handed to the socket server with each listener (``SocketServer.listen``)."""

    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl: ListenerSasl | None = None
    principal_mapper: SslPrincipalMapper | None = field(default=None)

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    def authenticator(
        self, conn: Any, api_versions, previous: SaslSession | None = None
    ) -> SaslServerAuthenticator | None:
        """The exchange that opens a connection, or (``previous``) re-authenticates it."""
        if self.sasl is None:
            return None
        return SaslServerAuthenticator(self.sasl, api_versions, conn.peer, self.name, previous)

    def close(self) -> None:
        """Stop the listener's background work (OAUTHBEARER's JWKS refresh)."""
        if self.sasl is not None and self.sasl.oauth is not None:
            self.sasl.oauth.close()

    def ssl_principal(self, ssl_object: Any) -> KafkaPrincipal | None:
        """On an SSL listener: ``User:<mapped DN>`` of the client certificate, ANONYMOUS
        (None) without one. NoMatchingRule when no mapping rule takes the DN."""
        if self.principal_mapper is None or ssl_object is None:
            return None
        der = ssl_object.getpeercert(binary_form=True)
        if not der:
            return None
        dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
        return KafkaPrincipal.user(self.principal_mapper.name(dn))


def build_listener_security(
    cfg: BrokerConfig, endpoint: EndPoint, credentials: CredentialCache
) -> ListenerSecurity:
    protocol, name = endpoint.security_protocol, endpoint.name
    sec = ListenerSecurity(name, protocol)
    if protocol in ("SSL", "SASL_SSL"):
        settings = listener_ssl_settings(cfg, name)
        try:
            sec.ssl_context = server_context(
                settings, listener_prefix(name) if _has_prefixed(cfg, name) else ""
            )
        except SslConfigError as exc:
            raise ConfigError(f"Listener {endpoint.uri}: {exc}") from None
        if protocol == "SSL":
            rules = listener_value(cfg, name, "ssl.principal.mapping.rules")
            try:
                sec.principal_mapper = SslPrincipalMapper(rules)
            except ValueError as exc:
                raise ConfigError(f"Invalid value for ssl.principal.mapping.rules: {exc}") from None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        enabled = listener_value(cfg, name, "sasl.enabled.mechanisms")
        unsupported = [m for m in enabled if m not in SUPPORTED_MECHANISMS]
        if unsupported or not enabled:
            raise ConfigError(
                f"Listener {endpoint.uri}: sasl.enabled.mechanisms={','.join(enabled)}: "
                f"Quill implements {', '.join(SUPPORTED_MECHANISMS)} "
                f"(not {', '.join(unsupported) or 'an empty list'})"
            )
        users: dict[str, str] = {}
        if "PLAIN" in enabled:
            jaas = jaas_config(cfg, name, "PLAIN")
            if jaas is None:
                raise ConfigError(
                    f"Listener {endpoint.uri} enables PLAIN but has no "
                    f"{listener_prefix(name)}plain{JAAS_SUFFIX} (PlainLoginModule with user_<name>=...)"
                )
            users = jaas.plain_users()
        reauth = {m: mechanism_value(cfg, name, m, REAUTH_KEY) for m in enabled}
        sec.sasl = ListenerSasl(name, list(enabled), users, credentials, reauth)
        if "OAUTHBEARER" in enabled:
            sec.sasl.oauth = oauth_validator(
                jaas_config(cfg, name, "OAUTHBEARER"),
                cfg.raw.get(f"{listener_prefix(name)}oauthbearer.{HANDLER_KEY}"),
                lambda key: mechanism_value(cfg, name, "OAUTHBEARER", key),
                f"Listener {endpoint.uri}",
            )
    return sec


def mechanism_value(cfg: BrokerConfig, listener: str, mechanism: str, name: str) -> Any:
    """A key's value for one mechanism of a listener, as Kafka's SaslChannelBuilder picks
    it (KIP-368's connections.max.reauth.ms, OAUTHBEARER's sasl.oauthbearer.*): the
    mechanism's, the listener's, the broker's."""
    spec = KEYS[name]
    for key in (
        f"{listener_prefix(listener)}{mechanism.lower()}.{name}",
        listener_prefix(listener) + name,
    ):
        raw = cfg.raw.get(key)
        if raw is None:
            continue
        try:
            value = spec.parse(raw)
        except ValueError:
            raise ConfigError(f"Invalid value {raw!r} for configuration {key}") from None
        if spec.minimum is not None and value < spec.minimum:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {key}: a number >= {spec.minimum}"
            )
        return value
    return cfg[name]


def _has_prefixed(cfg: BrokerConfig, listener: str) -> bool:
    return any(k.startswith(listener_prefix(listener)) for k in cfg.raw)


def check_security(cfg: BrokerConfig) -> None:
    """Start-up checks of the security keys; the listeners' contexts are built here once
    so a bad keystore stops start-up with the key named."""
    names = {e.name.lower() for e in cfg.endpoints.bind}
    for key in (k for k in cfg.raw if k.startswith("listener.name.")):
        rest = key[len("listener.name.") :]
        listener, _, sub = rest.partition(".")
        ok = listener in names and (
            sub in LISTENER_KEYS
            or sub in (REAUTH_KEY, "max.connection.creation.rate")
            or _mechanism_key(sub) in SUPPORTED_MECHANISMS
        )
        if ok and sub.partition(".")[2] in MECHANISM_KEYS - {JAAS_SUFFIX[1:], REAUTH_KEY}:
            ok = _mechanism_key(sub) == "OAUTHBEARER"  # its handler and sasl.oauthbearer.*
        if not ok:
            raise ConfigError(
                f"Unsupported configuration {key}: Quill takes listener.name.<listener>.<key> "
                f"for a listener in listeners ({', '.join(sorted(names))}) and the ssl.*/sasl.* "
                f"keys, {REAUTH_KEY}, or <mechanism>.sasl.jaas.config and "
                f"<mechanism>.{REAUTH_KEY} (and OAUTHBEARER's oauthbearer.{HANDLER_KEY} and "
                "oauthbearer.sasl.oauthbearer.*)"
            )
    securities = listener_securities(cfg, CredentialCache())
    inter = next(e for e in cfg.endpoints.advertised if e.name == cfg.endpoints.inter_broker)
    if inter.security_protocol.startswith("SASL"):
        mechanism = cfg["sasl.mechanism.inter.broker.protocol"]
        enabled = securities[inter.name].sasl.enabled
        if mechanism not in enabled:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the "
                f"inter-broker listener {inter.name} (sasl.enabled.mechanisms="
                f"{','.join(enabled)})"
            )
        if mechanism == "OAUTHBEARER":
            _check_oauth_inter_broker(cfg, inter.name)
            return
        jaas = jaas_config(cfg, inter.name, mechanism)
        if jaas is None or not jaas.username or jaas.password is None:
            raise ConfigError(
                f"the inter-broker listener {inter.name} uses SASL {mechanism}: "
                f"{listener_prefix(inter.name)}{mechanism.lower()}{JAAS_SUFFIX} must give the broker's "
                'own username="..." password="..."'
            )


def _check_oauth_inter_broker(cfg: BrokerConfig, listener: str) -> None:
    """Brokers talk OAUTHBEARER with unsecured tokens from the listener's JAAS options
    (Kafka's unsecuredLoginStringClaim_sub=...), so that listener must take them."""
    if cfg.raw.get(f"{listener_prefix(listener)}oauthbearer.{HANDLER_KEY}", "").strip() not in (
        "",
        UNSECURED_HANDLER,
    ):
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol=OAUTHBEARER: the inter-broker listener "
            f"{listener} validates OIDC tokens, and a broker can only make unsecured ones"
        )
    try:
        _inter_broker_login(cfg, listener)
    except OAuthConfigError as exc:
        raise ConfigError(
            f"the inter-broker listener {listener} uses SASL OAUTHBEARER: "
            f"{listener_prefix(listener)}oauthbearer{JAAS_SUFFIX}: {exc}"
        ) from None


def _inter_broker_login(cfg: BrokerConfig, listener: str) -> UnsecuredLogin:
    jaas = jaas_config(cfg, listener, "OAUTHBEARER")
    return UnsecuredLogin.from_jaas(jaas.options if jaas is not None else {})


def _mechanism_key(sub: str) -> str | None:
    """The mechanism of a ``<mechanism>.<key>`` listener key (``<key>`` one of
    MECHANISM_KEYS), upper-cased; else None."""
    mechanism, _, key = sub.partition(".")
    return mechanism.upper() if key in MECHANISM_KEYS else None


def listener_securities(
    cfg: BrokerConfig, credentials: CredentialCache
) -> dict[str, ListenerSecurity]:
    """Listener name -> its ListenerSecurity, the SCRAM ones reading ``credentials``."""
    return {e.name: build_listener_security(cfg, e, credentials) for e in cfg.endpoints.bind}


def inter_broker_security(cfg: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the others' ``inter.broker.listener.name``: that
    listener's protocol, its TLS stores, ``sasl.mechanism.inter.broker.protocol`` with the
    username/password of the listener's JAAS config for that mechanism (as Kafka)."""
    name = cfg.endpoints.inter_broker
    protocol = next(e for e in cfg.endpoints.advertised if e.name == name).security_protocol
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        settings = listener_ssl_settings(cfg, name)
        try:
            context = broker_client_context(settings, listener_prefix(name))
        except SslConfigError as exc:
            raise ConfigError(f"inter-broker listener {name}: {exc}") from None
    if not protocol.startswith("SASL"):
        return ClientSecurity(protocol, context=context)
    mechanism = cfg["sasl.mechanism.inter.broker.protocol"]
    if mechanism == "OAUTHBEARER":
        login = _inter_broker_login(cfg, name)
        return ClientSecurity(protocol, mechanism, context=context, oauthbearer=login).check()
    jaas = jaas_config(cfg, name, mechanism)
    return ClientSecurity(
        protocol, mechanism, jaas.username, jaas.password, context=context
    ).check()
