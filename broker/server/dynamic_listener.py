"""KIP-226's headline case: a TLS listener's keystore or truststore replaced at run time
(certificate rotation), as Kafka's SslFactory.reconfigure does.

``listener.name.<listener>.ssl.keystore.*`` / ``.ssl.key.password`` /
``.ssl.truststore.*`` set per broker (``/config/brokers/<id>``) win over the static
settings. Before anything is stored the new settings are loaded as a whole (the store
opens, the key matches its certificate, the truststore loads) and, unless the static
``ssl.allow.dn.changes`` / ``ssl.allow.san.changes`` say otherwise, the new certificate
must keep the old one's subject DN and subjectAltNames. Then the listener's context is
swapped: connections accepted from then on get the new certificate, open ones keep
theirs.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cryptography import x509

from ..protocol.errors import ErrorCode, KafkaError
from ..security.ssl_factory import SslConfigError, keystore_certificate, server_context
from .config import KEYS
from .dynamic_config import SECURITY_DYNAMIC
from .listener_security import listener_prefix, listener_ssl_settings, listener_value

if TYPE_CHECKING:
    from .config import BrokerConfig
    from .listener_security import ListenerSecurity

log = logging.getLogger(__name__)
KEYSTORE_KEYS = frozenset(k for k in SECURITY_DYNAMIC if not k.startswith("ssl.truststore."))


def _sans(cert: x509.Certificate | None) -> list[str]:
    if cert is None:
        return []
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return sorted(str(name.value) for name in ext)


def _dn(cert: x509.Certificate | None) -> str | None:
    return None if cert is None else cert.subject.rfc4514_string()


class ListenerSslUpdater:
    """The TLS listeners' applied settings, and their reconfiguration."""

    def __init__(self, cfg: BrokerConfig, securities: Mapping[str, ListenerSecurity]) -> None:
        self.cfg = cfg
        self.securities = securities
        self.applied = {
            name: listener_ssl_settings(cfg, name) for name, sec in securities.items() if sec.tls
        }

    def settings(self, listener: str, per_broker: Mapping[str, str]) -> dict[str, Any]:
        """The listener's static ``ssl.*`` values with its dynamic ones over them."""
        out = listener_ssl_settings(self.cfg, listener)
        for key in SECURITY_DYNAMIC:
            raw = per_broker.get(listener_prefix(listener) + key)
            if raw is not None:
                out[key] = KEYS[key].parse(raw)
        return out

    def _check_compatible(self, listener: str, old: dict, new: dict) -> None:
        """Kafka's SslFactory.CertificateEntries.ensureCompatible."""
        if all(old.get(k) == new.get(k) for k in KEYSTORE_KEYS):
            return
        prefix = listener_prefix(listener)
        before = keystore_certificate(old, prefix)
        after = keystore_certificate(new, prefix)
        if not listener_value(self.cfg, listener, "ssl.allow.dn.changes") and _dn(before) != _dn(
            after
        ):
            raise SslConfigError(
                f"Keystore DistinguishedName does not match: existing={{DN={_dn(before)}}}, "
                f"new={{DN={_dn(after)}}}"
            )
        if not listener_value(self.cfg, listener, "ssl.allow.san.changes") and _sans(
            before
        ) != _sans(after):
            raise SslConfigError(
                f"Keystore SubjectAltNames do not match: existing={{SAN={_sans(before)}}}, "
                f"new={{SAN={_sans(after)}}}"
            )

    def contexts(self, per_broker: Mapping[str, str]) -> dict[str, tuple[dict, ssl.SSLContext]]:
        """The listeners whose settings change, with their new contexts; INVALID_CONFIG
        (Kafka's message) when one does not load or is not compatible."""
        out = {}
        for listener, old in self.applied.items():
            new = self.settings(listener, per_broker)
            if new == old:
                continue
            try:
                ctx = server_context(new, listener_prefix(listener))
                self._check_compatible(listener, old, new)
            except SslConfigError as exc:
                raise KafkaError(
                    ErrorCode.invalid_config,
                    f"Validation of dynamic config update of SSLFactory failed: {exc}",
                ) from None
            out[listener] = (new, ctx)
        return out

    def apply(self, per_broker: Mapping[str, str]) -> None:
        """New connections of each changed listener get its new context."""
        try:
            changed = self.contexts(per_broker)
        except KafkaError as exc:
            log.error("TLS listeners keep their keystores: %s", exc.message)
            return
        for listener, (settings, ctx) in changed.items():
            self.securities[listener].ssl_context = ctx
            self.applied[listener] = settings
            log.info("listener %s: new keystore/truststore for new connections", listener)
