"""Why a SASL exchange failed, as Kafka's exception types map to error codes."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """SASL_AUTHENTICATION_FAILED (58): bad credentials or a malformed token."""

    def __init__(self, message: str, username: str | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.username = username
        self.detail = detail  # for the broker's log only: the client gets ``message``


class IllegalSaslStateError(Exception):
    """ILLEGAL_SASL_STATE (34): a request that does not fit the exchange's state."""


class UnsupportedSaslMechanismError(Exception):
    """UNSUPPORTED_SASL_MECHANISM (33): a mechanism this listener does not enable."""
