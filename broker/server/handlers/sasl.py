"""SaslHandshake and SaslAuthenticate outside an exchange: ILLEGAL_SASL_STATE.

On a SASL listener the exchange itself is run by the connection's
SaslServerAuthenticator (``broker/security/authenticator.py``) before any request reaches
KafkaApis; these handlers answer what comes after it, or on a listener without SASL,
as Kafka's KafkaApis does. A re-authentication (KIP-368) never reaches them: the
connection hands a SaslHandshake of a session with a lifetime to a new authenticator;
without a lifetime (connections.max.reauth.ms=0) it lands here.
"""

from __future__ import annotations

from typing import Any

from ...protocol.errors import ErrorCode
from .. import request_context


async def handle_sasl_handshake(server: Any, header: Any, request: Any) -> dict:
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": ()}


async def handle_sasl_authenticate(server: Any, header: Any, request: Any) -> dict:
    listener = request_context.listener_name.get()
    return {
        "error_code": ErrorCode.illegal_sasl_state,
        "error_message": (
            "SaslAuthenticate request received after successful authentication"
            f" or on listener {listener}, which has no SASL exchange to continue"
        ),
        "auth_bytes": b"",
        "session_lifetime": 0,
    }
