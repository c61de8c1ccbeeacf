"""The client side of a SASL exchange over Kafka requests (SaslHandshake v1, then
SaslAuthenticate v2 rounds): PLAIN, SCRAM-SHA-256/512 on ``scramp``, and OAUTHBEARER
with unsecured tokens (``oauthbearer.py``). The same
exchange re-authenticates a connection (KIP-368): ``authenticate`` returns the session
lifetime the broker gave (0: none)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from scramp import ScramClient, ScramException

from ..security.oauthbearer import client_initial_response
from .security import ClientSecurity

Request = Callable[[int, int, dict], Awaitable[Any]]


class AuthenticationFailed(ConnectionError):
    """The broker refused our credentials or mechanism (SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM); the message is the broker's."""


async def authenticate(request: Request, security: ClientSecurity, peer: str) -> int:
    """Run the exchange; the session's lifetime in ms (SaslAuthenticate's
    session_lifetime_ms, 0 when the session lasts as long as the connection)."""
    mechanism = security.sasl_mechanism
    resp = await request(17, 1, {"mechanism": mechanism})
    if resp.error_code != 0:
        raise AuthenticationFailed(
            f"{peer} does not enable SASL mechanism {mechanism} "
            f"(it offers {', '.join(resp.mechanisms)}; error {resp.error_code.name})"
        )
    if mechanism == "OAUTHBEARER":
        login = security.oauthbearer
        first = client_initial_response(login.token(), extensions=login.extensions)
        resp = await _round(request, first, peer)
        if resp.auth_bytes:  # the broker's error challenge: acknowledge it, then it fails
            await _round(request, b"\x01", peer)
            raise AuthenticationFailed(f"{peer}: {resp.auth_bytes.decode(errors='replace')}")
        return _lifetime_ms(resp)
    if mechanism == "PLAIN":
        token = f"\0{security.username}\0{security.password}".encode()
        return _lifetime_ms(await _round(request, token, peer))
    scram = ScramClient([mechanism], security.username, security.password)
    server_first = await _round(request, scram.get_client_first().encode(), peer)
    try:
        scram.set_server_first(server_first.auth_bytes.decode())
        final = await _round(request, scram.get_client_final().encode(), peer)
        scram.set_server_final(final.auth_bytes.decode())
    except (ScramException, UnicodeDecodeError) as exc:
        raise AuthenticationFailed(f"{peer}: SCRAM exchange failed: {exc}") from None
    return _lifetime_ms(final)


async def _round(request: Request, token: bytes, peer: str) -> Any:
    resp = await request(36, 2, {"auth_bytes": token})
    if resp.error_code != 0:
        raise AuthenticationFailed(f"{peer}: {resp.error_message or resp.error_code.name}")
    return resp


def _lifetime_ms(resp: Any) -> int:
    return int(resp.session_lifetime.total_seconds() * 1000)
