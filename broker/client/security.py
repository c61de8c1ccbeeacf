"""ClientSecurity: how a client of ours (the broker's inter-broker connections, the
CLIs' ``--command-config``, the console and workers) secures its Kafka connections.

``from_properties`` takes the keys of either client family, as a properties file
holds them:

* librdkafka: ``security.protocol``, ``sasl.mechanisms``/``sasl.mechanism``,
  ``sasl.username``, ``sasl.password``, ``ssl.ca.location``,
  ``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm``, ``enable.ssl.certificate.verification``;
* librdkafka's OAUTHBEARER with unsecured tokens: ``sasl.oauthbearer.config``
  (``principal=... scope=...``) and ``enable.sasl.oauthbearer.unsecure.jwt``;
* Java: ``sasl.jaas.config`` (its ``username=``/``password=``, or OAuthBearerLoginModule's
  ``unsecuredLogin*`` options),
  ``ssl.truststore.location`` of ``ssl.truststore.type`` JKS (Java's default), PKCS12
  (with ``ssl.truststore.password``) or PEM, read into ``ssl_cadata`` for JKS and
  PKCS12; ``ssl.truststore.certificates``; ``ssl.keystore.location`` in PEM
  (``ssl.keystore.type=PEM``).

Other ``ssl.``/``sasl.`` keys are refused with the key named (a key we accept is a key
we honour); keys of other kinds (``bootstrap.servers``, ``client.id``) are left to the
caller.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..security.jaas import parse_jaas_config
from ..security.keystores import KeyStoreError
from ..security.ssl_factory import client_context, truststore_cadata
from .oauthbearer import OAuthConfigError, UnsecuredLogin

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "username",
    "sasl.password": "password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.keystore.location": "ssl_certfile",  # PEM: key and chain in one file
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_key_password",
}
_OTHER_KEYS = (
    "sasl.jaas.config",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
)
_TRUSTSTORE_KEYS = (
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.type",
    "ssl.truststore.password",
)


class ClientSecurityError(ValueError):
    """Client security properties that cannot work; the message names the key."""


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ssl_cafile: str | None = None
    ssl_cadata: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True
    ssl_verify: bool = True
    #: OAUTHBEARER: how to make unsecured tokens (broker.client.oauthbearer)
    oauthbearer: UnsecuredLogin | None = None
    #: a context built elsewhere (the broker's own, from its keystore settings)
    context: ssl.SSLContext | None = None

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        if self.context is not None:
            return self.context
        ctx = client_context(
            self.ssl_cafile,
            self.ssl_cadata,
            self.ssl_certfile,
            self.ssl_keyfile,
            self.ssl_key_password,
            check_hostname=self.ssl_check_hostname and self.ssl_verify,
        )
        if not self.ssl_verify:
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def check(self) -> ClientSecurity:
        """Self, or ClientSecurityError naming what is missing or unknown."""
        if self.security_protocol not in PROTOCOLS:
            raise ClientSecurityError(
                f"security.protocol={self.security_protocol} is not one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise ClientSecurityError(
                    f"sasl.mechanism={self.sasl_mechanism or '(unset)'}: use one of "
                    f"{', '.join(MECHANISMS)}"
                )
            if self.sasl_mechanism == "OAUTHBEARER":
                if self.oauthbearer is None:
                    raise ClientSecurityError(
                        "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.config "
                        "(principal=...) or sasl.jaas.config with OAuthBearerLoginModule's "
                        "unsecuredLoginStringClaim_sub=..."
                    )
            elif not self.username or self.password is None:
                raise ClientSecurityError(
                    f"security.protocol={self.security_protocol} needs sasl.username and "
                    "sasl.password (or sasl.jaas.config with username= and password=)"
                )
        return self

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        values: dict[str, object] = {}
        for key, raw in props.items():
            value = str(raw).strip()
            if key in _KEYS:
                values[_KEYS[key]] = value
            elif key == "sasl.jaas.config":
                try:
                    jaas = parse_jaas_config(value)
                except ValueError as exc:
                    raise ClientSecurityError(f"sasl.jaas.config: {exc}") from None
                if jaas.login_module == OAUTHBEARER_LOGIN_MODULE:
                    values.setdefault(
                        "oauthbearer", _unsecured(UnsecuredLogin.from_jaas, jaas.options)
                    )
                else:
                    values.setdefault("username", jaas.username)
                    values.setdefault("password", jaas.password)
            elif key == "sasl.oauthbearer.config":
                values["oauthbearer"] = _unsecured(UnsecuredLogin.from_librdkafka, value)
            elif key == "enable.sasl.oauthbearer.unsecure.jwt":
                if value.lower() not in ("true", "false"):
                    raise ClientSecurityError(f"{key}={value}: true or false")
            elif key == "ssl.endpoint.identification.algorithm":
                values["ssl_check_hostname"] = value.lower() == "https"
            elif key == "enable.ssl.certificate.verification":
                values["ssl_verify"] = value.lower() != "false"
            elif key == "ssl.keystore.type":
                if value.upper() != "PEM":
                    raise ClientSecurityError(f"{key}={value} is not supported; use PEM")
            elif key in _TRUSTSTORE_KEYS:
                continue  # read below, together
            elif key.startswith(("ssl.", "sasl.")):
                raise ClientSecurityError(
                    f"unsupported client security property {key}; supported: "
                    f"{', '.join(sorted({*_KEYS, *_OTHER_KEYS, *_TRUSTSTORE_KEYS}))}"
                )
        try:
            cafile, cadata = truststore_cadata({k: props.get(k) for k in _TRUSTSTORE_KEYS})
        except KeyStoreError as exc:
            raise ClientSecurityError(str(exc)) from None
        if cafile is not None:
            values["ssl_cafile"] = cafile
        if cadata is not None:
            values["ssl_cadata"] = cadata
        if "security_protocol" in values:
            values["security_protocol"] = str(values["security_protocol"]).upper()
        if values.get("sasl_mechanism"):
            values["sasl_mechanism"] = str(values["sasl_mechanism"]).upper()
        return cls(**values).check()  # type: ignore[arg-type]

    def with_context(self, context: ssl.SSLContext | None) -> ClientSecurity:
        return replace(self, context=context)


def _unsecured(make, source) -> UnsecuredLogin:
    try:
        return make(source)
    except OAuthConfigError as exc:
        raise ClientSecurityError(str(exc)) from None


PLAINTEXT = ClientSecurity()
