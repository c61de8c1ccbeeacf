"""SASL/OAUTHBEARER (RFC 7628, KIP-255) on the server, as Kafka's OAuthBearerSaslServer.

The client's one message is the RFC 7628 client initial response::

    n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]...^A

(``^A`` is 0x01). The token goes to the listener's validator (``oauthbearer_tokens.py``):
the unsecured one (alg ``none`` JWTs, for development) or the OIDC one (KIP-768, signed
JWTs checked against a JWKS). A valid token completes the exchange as ``User:<sub>``
and its ``exp`` bounds the session (KIP-368). A refused token is answered, as Kafka
does, with the challenge ``{"status":"invalid_token"}``; the client then sends a single
0x01 and the exchange fails with SASL_AUTHENTICATION_FAILED. Extensions are read and
ignored (Kafka's default handlers validate none).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Protocol

from .sasl_errors import SaslAuthenticationError

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
SEPARATOR = "\x01"
#: RFC 7628 section 3.1, as Kafka's OAuthBearerClientInitialResponse reads it
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}"
    rf"(?P<kvpairs>(?:{_KEY}={_VALUE}{SEPARATOR})*){SEPARATOR}"
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """The token, authzid and extensions; SaslAuthenticationError for anything else."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(
            "Invalid OAUTHBEARER client first message: not UTF-8"
        ) from None
    match = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise SaslAuthenticationError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in match["kvpairs"].split(SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslAuthenticationError("Invalid OAUTHBEARER client first message: no auth")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None or bearer["scheme"].lower() != "bearer":
        raise SaslAuthenticationError(
            "Invalid OAUTHBEARER client first message: auth is not 'Bearer <token>'"
        )
    authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return ClientInitialResponse(bearer["token"], authzid, pairs)


def client_initial_response(
    token: str, authzid: str = "", extensions: dict[str, str] | None = None
) -> bytes:
    """The message a client sends (our own clients: broker.client.sasl)."""
    saslname = authzid.replace("=", "=3D").replace(",", "=2C")
    pairs = "".join(f"{k}={v}{SEPARATOR}" for k, v in (extensions or {}).items())
    head = f"n,a={saslname}," if authzid else "n,,"
    return f"{head}{SEPARATOR}auth=Bearer {token}{SEPARATOR}{pairs}{SEPARATOR}".encode()


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token: Kafka's OAuthBearerToken."""

    principal_name: str
    lifetime_ms: int  # its exp, in wall-clock ms
    scope: frozenset[str] = frozenset()


class TokenRefused(Exception):
    """A token that did not validate: ``reason`` is for the broker's log; ``status``
    and ``scope`` go into the error challenge (RFC 7628 section 3.2.2)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None):
        super().__init__(reason)
        self.status = status
        self.scope = scope


class TokenValidator(Protocol):
    kind: str  # for log lines: "unsecured" or "OIDC"

    async def validate(self, token: str) -> OAuthBearerToken: ...

    def close(self) -> None: ...  # stop any background work (the JWKS refresh)


def error_challenge(refused: TokenRefused) -> str:
    """Kafka's jsonErrorResponse: ``{"status":"invalid_token"}`` and the scope, if any."""
    body = {"status": refused.status}
    if refused.scope:
        body["scope"] = refused.scope
    return json.dumps(body, separators=(",", ":"))


class OAuthBearerServer:
    mechanism = MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiration_ms: int | None = None
        self._error: str | None = None  # the challenge sent for a refused token
        self._reason = ""

    async def evaluate(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("OAUTHBEARER authentication already complete")
        if message == SEPARATOR.encode() and self._error is not None:
            # the client's acknowledgement of our error challenge: now fail (Kafka's words)
            raise SaslAuthenticationError(self._error, None, self._reason)
        if self._error is not None:
            raise SaslAuthenticationError("Invalid OAUTHBEARER message after an error challenge")
        response = parse_client_initial_response(message)
        try:
            token = await self._validator.validate(response.token)
        except TokenRefused as exc:
            self._error, self._reason = error_challenge(exc), str(exc)
            log.warning("OAUTHBEARER %s token refused: %s", self._validator.kind, exc)
            return self._error.encode()
        if response.authorization_id and response.authorization_id != token.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id "
                f"({response.authorization_id}) that is different from the token's principal "
                f"name ({token.principal_name})",
                token.principal_name,
            )
        self.authorization_id = token.principal_name
        self.credential_expiration_ms = token.lifetime_ms
        self.complete = True
        return b""
