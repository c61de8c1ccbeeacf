"""SASL/PLAIN (RFC 4616) on the server, as Kafka's PlainSaslServer: one token
``[authzid] NUL authcid NUL passwd``, checked against the listener's JAAS
``user_<name>`` options; an authorization id other than the user is refused."""

from __future__ import annotations

import hmac

from .sasl_errors import SaslAuthenticationError


def parse_plain_token(token: bytes) -> tuple[str, str, str]:
    """(authzid, username, password); SaslAuthenticationError for a malformed token."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError("Invalid SASL/PLAIN request: not UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise SaslAuthenticationError(
            "Invalid SASL/PLAIN request: expected 3 tokens, got " + str(len(parts))
        )
    authzid, username, password = parts
    if not username:
        raise SaslAuthenticationError("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationError("Authentication failed: password not specified")
    return authzid, username, password


class PlainServer:
    mechanism = "PLAIN"
    credential_expiration_ms = None  # PLAIN passwords do not expire (KIP-368)

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationError("PLAIN authentication already complete")
        authzid, username, password = parse_plain_token(token)
        expected = self._users.get(username)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError(
                "Authentication failed: Invalid username or password", username
            )
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
                username,
            )
        self.authorization_id = username
        self.complete = True
        return b""
