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
KafkaApis; a later SaslHandshake/SaslAuthenticate is answered ILLEGAL_SASL_STATE there.
"""

from __future__ import annotations

import logging
import struct
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

    def evaluate(self, token: bytes) -> bytes: ...


class SaslMechanisms(Protocol):
    """What a listener offers: its enabled mechanisms and a server for each."""

    enabled: list[str]

    def server(self, mechanism: str) -> SaslServer: ...


class SaslServerAuthenticator:
    def __init__(
        self,
        mechanisms: SaslMechanisms,
        api_versions: Callable[[Any, bytes], Awaitable[Any]],
        peer: str,
        listener: str,
    ) -> None:
        self._mechanisms = mechanisms
        self._api_versions = api_versions
        self._peer = peer
        self._listener = listener
        self._server: SaslServer | None = None
        #: after SaslHandshake v0 the frames are bare tokens without Kafka headers
        self.raw_tokens = False
        self.complete = False
        #: set when the connection must be closed once the current response is sent
        self.failed: str | None = None

    async def handle(self, conn: Any, frame: bytes) -> bytes | None:
        """The response to one frame read before authentication completed."""
        if self.raw_tokens:
            return self._raw_token(conn, frame)
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
            return self._authenticate(conn, request.auth_bytes, version, correlation_id)
        state = "authentication" if self._server is not None else "handshake"
        raise ProtocolError(
            f"Unexpected Kafka request of type {api_key} during SASL {state} "
            f"(ILLEGAL_SASL_STATE) on listener {self._listener}"
        )

    def _handshake(self, mechanism: str, version: int, correlation_id: int) -> bytes:
        enabled = self._mechanisms.enabled
        if mechanism not in enabled:
            self.failed = (
                f"Unsupported SASL mechanism {mechanism} (enabled on listener "
                f"{self._listener}: {', '.join(enabled)})"
            )
            log.warning("Failed authentication with %s: %s", self._peer, self.failed)
            error = ErrorCode.unsupported_sasl_mechanism
        else:
            self._server = self._mechanisms.server(mechanism)
            self.raw_tokens = version == 0
            error = ErrorCode.none
        body = {"error_code": error, "mechanisms": tuple(enabled)}
        return _encode(SASL_HANDSHAKE, version, correlation_id, body)

    def _authenticate(self, conn: Any, token: bytes, version: int, correlation_id: int) -> bytes:
        body: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None}
        try:
            body["auth_bytes"] = self._evaluate(conn, token)
        except SaslAuthenticationError as exc:
            body.update(
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=str(exc),
                auth_bytes=b"",
            )
        return _encode(SASL_AUTHENTICATE, version, correlation_id, body)

    def _raw_token(self, conn: Any, token: bytes) -> bytes | None:
        try:
            challenge = self._evaluate(conn, token)
        except SaslAuthenticationError:
            return None  # v0 has no way to say why: the connection just closes
        return struct.pack(">i", len(challenge)) + challenge

    def _evaluate(self, conn: Any, token: bytes) -> bytes:
        server = self._server
        try:
            challenge = server.evaluate(token)
        except SaslAuthenticationError as exc:
            who = f"User:{exc.username}" if exc.username else "unknown user"
            self.failed = f"{exc} ({server.mechanism}, {who})"
            log.warning(
                "Failed authentication with %s (%s, principal %s, listener %s): %s%s",
                self._peer,
                server.mechanism,
                who,
                self._listener,
                exc,
                f" ({exc.detail})" if exc.detail else "",
            )
            raise
        if server.complete:
            conn.principal = KafkaPrincipal.user(server.authorization_id)
            self.complete = True
            log.debug("%s authenticated as %s (%s)", self._peer, conn.principal, server.mechanism)
        return challenge


def _check_version(name: str, version: int, spoken: tuple[int, int]) -> None:
    if not spoken[0] <= version <= spoken[1]:
        raise ProtocolError(
            f"{name} v{version} is not supported (we speak v{spoken[0]}-v{spoken[1]})"
        )


def _encode(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    return encode_response(
        api_key, version, correlation_id, build(response_schema(api_key, version), body)
    )
