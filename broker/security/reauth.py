"""KIP-368: how long a SASL session lasts, and re-authentication on the same connection.

When ``connections.max.reauth.ms`` (or the listener's
``listener.name.<listener>.[<mechanism>.]connections.max.reauth.ms``) is above 0, or the
credential itself expires, a completed exchange has a lifetime: SaslAuthenticate v1+
tells the client ``session_lifetime_ms`` (the smaller of the two, as Kafka's
SaslServerAuthenticator computes it), and the connection keeps a ``SaslSession``.
Before that lifetime ends the client sends SaslHandshake and SaslAuthenticate again
on the same connection (at most one re-authentication a second, as Kafka's
KafkaChannel allows); the principal must stay the same. A session that expired
closes its connection at the next request that is not a re-authentication.

``SaslStats`` are the listener's counts under Kafka's socket-server-metrics names
(``successful-reauthentication-total``, ``expired-connections-killed-count``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from .principal import KafkaPrincipal

SASL_HANDSHAKE = 17
#: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
MIN_REAUTH_INTERVAL_NS = 1_000_000_000


@dataclass
class SaslStats:
    """One listener's authentication counts (Kafka's selector metrics, per listener)."""

    successful_authentication: int = 0
    successful_authentication_no_reauth: int = 0  # clients that cannot re-authenticate
    failed_authentication: int = 0
    successful_reauthentication: int = 0
    failed_reauthentication: int = 0
    expired_connections_killed: int = 0


def session_lifetime_ms(
    max_reauth_ms: int, credential_expiration_ms: int | None, now_ms: int
) -> int | None:
    """Kafka's calcCompletionTimesAndReturnSessionLifetimeMs: the session's lifetime,
    or None when neither the config nor the credential sets one (the session lasts as
    long as the connection)."""
    reauth = max_reauth_ms > 0
    if credential_expiration_ms is None and not reauth:
        return None
    if credential_expiration_ms is None:
        return max_reauth_ms
    left = max(0, credential_expiration_ms - now_ms)
    return min(left, max_reauth_ms) if reauth else left


@dataclass
class SaslSession:
    """What a completed exchange with a lifetime leaves on its connection."""

    mechanism: str
    principal: KafkaPrincipal
    lifetime_ms: int
    expires_ns: int  # time.monotonic_ns() at which it ends
    stats: SaslStats
    reauth_started_ns: int = 0  # when the last re-authentication began (0: never)

    def starts_reauthentication(self, frame: bytes, now_ns: int) -> bool:
        """A SaslHandshake while re-authentication is allowed (not twice within a
        second): the frame begins a new exchange. Otherwise it goes to KafkaApis and
        is answered ILLEGAL_SASL_STATE, as in Kafka."""
        if frame[:2] != SASL_HANDSHAKE.to_bytes(2, "big"):
            return False
        if self.reauth_started_ns and now_ns - self.reauth_started_ns < MIN_REAUTH_INTERVAL_NS:
            return False
        return True

    def expired(self, now_ns: int) -> bool:
        return now_ns >= self.expires_ns
