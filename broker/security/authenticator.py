"""SaslServerAuthenticator: the SASL exchange that opens every connection on a
SASL_PLAINTEXT or SASL_SSL listener, before any other request is served.

Kafka's state machine (SaslServerAuthenticator.java), frame by frame:

* ApiVersions is answered (clients ask before the handshake), then SaslHandshake
  names a mechanism. A mechanism the listener does not enable gets
  UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection is closed.
* After SaslHandshake v1, each token travels in a SaslAuthenticate request (v0-v2);
  after v0, the tokens are raw size-prefixed frames with no Kafka header, both ways.
* Bad credentials or a malformed token: SaslAuthenticate answers
  SASL_AUTHENTICATION_FAILED with a sentence, then the connection is closed (a raw-token
  client just sees it closed). Any other request before authentication completes
  (ILLEGAL_SASL_STATE in Kafka's words) closes the connection without an answer.

Once complete, ``conn.principal`` is ``User:<name>`` and the connection's frames go to
KafkaApis. When the session has a lifetime (KIP-368, ``reauth.py``) the
SaslAuthenticate response says it (``session_lifetime_ms``, v1+) and ``session`` is set;
a later SaslHandshake then starts a new authenticator with ``previous`` set (a
re-authentication: same mechanism, same principal, or it fails and the connection is
closed). Without a lifetime a later SaslHandshake/SaslAuthenticate is answered
ILLEGAL_SASL_STATE by KafkaApis.
"""

from __future__ import annotations

import datetime
import inspect
import logging
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..protocol.errors import ErrorCode
from ..protocol.messages import (
    ProtocolError,
    build,
    encode_response,
    parse_request,
    peek_header,
    response_schema,
)
from .principal import KafkaPrincipal
from .reauth import SaslSession, SaslStats, session_lifetime_ms
from .sasl_errors import SaslAuthenticationError

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: the versions spoken (ApiVersions advertises the same: server/apis.py)
HANDSHAKE_VERSIONS, AUTHENTICATE_VERSIONS = (0, 1), (0, 2)
#: Kafka's sasl.server.max.receive.size: the largest frame read before authentication
SASL_MAX_RECEIVE_SIZE = 524288


class SaslServer(Protocol):
    mechanism: str
    complete: bool
    authorization_id: str | None
    credential_expiration_ms: int | None  # wall-clock ms the credential ends, if it does

    def evaluate(self, token: bytes) -> bytes | Awaitable[bytes]: ...  # async: OAUTHBEARER


class SaslMechanisms(Protocol):
    """What a listener offers: its enabled mechanisms, a server for each, the
    connections.max.reauth.ms of each, and the listener's counts."""

    enabled: list[str]
    stats: SaslStats

    def server(self, mechanism: str) -> SaslServer: ...

    def max_reauth_ms(self, mechanism: str) -> int: ...


class SaslServerAuthenticator:
    def __init__(
        self,
        mechanisms: SaslMechanisms,
        api_versions: Callable[[Any, bytes], Awaitable[Any]],
        peer: str,
        listener: str,
        previous: SaslSession | None = None,
    ) -> None:
        self._mechanisms = mechanisms
        self._previous = previous  # set: this exchange re-authenticates that session
        self._started_ns = time.monotonic_ns()
        self._api_versions = api_versions
        self._peer = peer
        self._listener = listener
        self._server: SaslServer | None = None
        #: after SaslHandshake v0 the frames are bare tokens without Kafka headers
        self.raw_tokens = False
        self.complete = False
        #: set when the connection must be closed once the current response is sent
        self.failed: str | None = None
        #: the completed session, when it has a lifetime (KIP-368)
        self.session: SaslSession | None = None
        self._supports_reauth = False  # a SaslAuthenticate v1+ came (Kafka's test)
        self._bad_mechanism: str | None = None

    @property
    def _what(self) -> str:
        return "re-authentication" if self._previous is not None else "authentication"

    async def handle(self, conn: Any, frame: bytes) -> bytes | None:
        """The response to one frame read before authentication completed."""
        if self.raw_tokens:
            return await self._raw_token(conn, frame)
        api_key, version, correlation_id = peek_header(frame)
        if api_key == API_VERSIONS:
            return await self._api_versions(conn, frame)
        if api_key == SASL_HANDSHAKE and self._server is None:
            _check_version("SaslHandshake", version, HANDSHAKE_VERSIONS)
            _header, request = parse_request(frame)
            return self._handshake(request.mechanism, version, correlation_id)
        if api_key == SASL_AUTHENTICATE and self._server is not None:
            _check_version("SaslAuthenticate", version, AUTHENTICATE_VERSIONS)
            _header, request = parse_request(frame)
            return await self._authenticate(conn, request.auth_bytes, version, correlation_id)
        state = "authentication" if self._server is not None else "handshake"
        raise ProtocolError(
            f"Unexpected Kafka request of type {api_key} during SASL {state} "
            f"(ILLEGAL_SASL_STATE) on listener {self._listener}"
        )

    def _handshake(self, mechanism: str, version: int, correlation_id: int) -> bytes:
        enabled = self._mechanisms.enabled
        if mechanism not in enabled:
            self._fail(
                f"Unsupported SASL mechanism {mechanism} (enabled on listener "
                f"{self._listener}: {', '.join(enabled)})"
            )
            log.warning("Failed %s with %s: %s", self._what, self._peer, self.failed)
            error = ErrorCode.unsupported_sasl_mechanism
        else:
            if self._previous is not None and mechanism != self._previous.mechanism:
                # Kafka's REAUTH_BAD_MECHANISM: the handshake succeeds, the next token fails
                self._bad_mechanism = (
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self._previous.mechanism}'"
                )
            self._server = self._mechanisms.server(mechanism)
            self.raw_tokens = version == 0
            error = ErrorCode.none
        body = {"error_code": error, "mechanisms": tuple(enabled)}
        return _encode(SASL_HANDSHAKE, version, correlation_id, body)

    async def _authenticate(
        self, conn: Any, token: bytes, version: int, correlation_id: int
    ) -> bytes:
        body: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None}
        self._supports_reauth = self._supports_reauth or version > 0
        try:
            body["auth_bytes"] = await self._evaluate(conn, token)
            if self.session is not None:
                body["session_lifetime"] = datetime.timedelta(milliseconds=self.session.lifetime_ms)
        except SaslAuthenticationError as exc:
            body.update(
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=str(exc),
                auth_bytes=b"",
            )
        return _encode(SASL_AUTHENTICATE, version, correlation_id, body)

    async def _raw_token(self, conn: Any, token: bytes) -> bytes | None:
        try:
            challenge = await self._evaluate(conn, token)
        except SaslAuthenticationError:
            return None  # v0 has no way to say why: the connection just closes
        return struct.pack(">i", len(challenge)) + challenge

    async def _evaluate(self, conn: Any, token: bytes) -> bytes:
        server = self._server
        try:
            if self._bad_mechanism is not None:
                raise SaslAuthenticationError(self._bad_mechanism)
            challenge = server.evaluate(token)
            if inspect.isawaitable(challenge):
                challenge = await challenge
            if server.complete:
                self._completed(conn, KafkaPrincipal.user(server.authorization_id))
        except SaslAuthenticationError as exc:
            who = f"User:{exc.username}" if exc.username else "unknown user"
            self._fail(f"{exc} ({server.mechanism}, {who})")
            log.warning(
                "Failed %s with %s (%s, principal %s, listener %s): %s%s",
                self._what,
                self._peer,
                server.mechanism,
                who,
                self._listener,
                exc,
                f" ({exc.detail})" if exc.detail else "",
            )
            raise
        return challenge

    def _completed(self, conn: Any, principal: KafkaPrincipal) -> None:
        """The exchange succeeded: check a re-authentication's principal, then set the
        connection's principal and the session's lifetime (KIP-368)."""
        previous, mechanism = self._previous, self._server.mechanism
        if previous is not None and principal != previous.principal:
            raise SaslAuthenticationError(
                "Cannot change principals during re-authentication from "  # Kafka's words
                f"{previous.principal.principal_type}.{previous.principal.name}: "
                f"{principal.principal_type}.{principal.name}",
                principal.name,
            )
        now_ns = time.monotonic_ns()
        lifetime = session_lifetime_ms(
            self._mechanisms.max_reauth_ms(mechanism),
            self._server.credential_expiration_ms,
            time.time_ns() // 1_000_000,
        )
        if lifetime is not None:
            self.session = SaslSession(
                mechanism, principal, lifetime, now_ns + lifetime * 1_000_000, self.stats
            )
            if previous is not None:  # at most one re-authentication a second, per connection
                self.session.reauth_started_ns = previous.reauth_started_ns
        conn.principal = principal
        self.complete = True
        stats = self.stats
        if previous is not None:
            stats.successful_reauthentication += 1
            log.debug(
                "%s re-authenticated as %s (%s) in %.1f ms; session lifetime %s ms",
                self._peer,
                principal,
                mechanism,
                (now_ns - self._started_ns) / 1e6,
                lifetime,
            )
            return
        stats.successful_authentication += 1
        if not self._supports_reauth:
            stats.successful_authentication_no_reauth += 1
        log.debug("%s authenticated as %s (%s)", self._peer, principal, mechanism)

    @property
    def stats(self) -> SaslStats:
        return self._mechanisms.stats

    def _fail(self, reason: str) -> None:
        self.failed = reason
        if self._previous is not None:
            self.stats.failed_reauthentication += 1
        else:
            self.stats.failed_authentication += 1


def _check_version(name: str, version: int, spoken: tuple[int, int]) -> None:
    if not spoken[0] <= version <= spoken[1]:
        raise ProtocolError(
            f"{name} v{version} is not supported (we speak v{spoken[0]}-v{spoken[1]})"
        )


def _encode(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return encode_response(
        api_key, version, correlation_id, build(response_schema(api_key, version), body)
    )
