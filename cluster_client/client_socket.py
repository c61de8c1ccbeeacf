"""A blocking socket to one broker, secured as the environment's client config says.

The console's protocol socket (cluster_client/wire.py) speaks the Kafka protocol on a
plain socket. On a SSL or SASL_SSL listener it is wrapped in TLS, and on a SASL listener
it then authenticates, both exactly as the broker's own client does: the TLS context
and the checks of the properties are broker.client.security.ClientSecurity's, and the
SASL exchange (SaslHandshake v1, SaslAuthenticate v2 rounds: PLAIN, SCRAM on scramp) is
broker.client.sasl.authenticate, driven here over blocking calls. A refusal raises
``AuthenticationFailed`` with the broker's sentence; the socket is closed. When the
broker gives the SASL session a lifetime (KIP-368), ``open_session`` says by when to
open a new socket (before the broker closes this one at its session's end).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping

from broker.client.sasl import AuthenticationFailed, authenticate
from broker.client.security import ClientSecurity
from broker.protocol.framing import FrameDecoder
from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from cluster_client.client_security import client_security

__all__ = ["AuthenticationFailed", "connect"]


def connect(
    address: tuple[str, int], timeout: float, conf: Mapping[str, str] | None = None
) -> socket.socket:
    """An open socket to `address`, through TLS and SASL when `conf` (client properties;
    default: the environment's, see cluster_client.client_security) asks for them."""
    return open_session(address, timeout, conf)[0]


def open_session(
    address: tuple[str, int], timeout: float, conf: Mapping[str, str] | None = None
) -> tuple[socket.socket, float | None]:
    """``connect``, and the time.monotonic() after which to use a new socket: 90% into
    the SASL session's lifetime, None when the session lasts as long as the socket."""
    security = client_security() if conf is None else ClientSecurity.from_properties(conf)
    sock = socket.create_connection(address, timeout=timeout)
    lifetime_ms = 0
    try:
        if security.tls:
            sock = security.ssl_context().wrap_socket(sock, server_hostname=address[0])
        if security.sasl:
            peer = f"{address[0]}:{address[1]}"
            lifetime_ms = _run(authenticate(_requester(sock), security, peer))
    except BaseException:
        sock.close()
        raise
    return sock, (time.monotonic() + 0.9 * lifetime_ms / 1000 if lifetime_ms > 0 else None)


def _run(coroutine):
    """Drive a coroutine whose awaits all complete at once (blocking calls inside)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the SASL exchange waited on something other than its socket")


def _requester(sock: socket.socket):
    """broker.client.sasl's `request(api_key, version, body)`, as blocking calls."""
    ids = iter(range(1, 1 << 31))

    async def request(api_key: int, version: int, body: dict):
        cid = next(ids)
        header = RequestHeader(api_key, version, cid, "quill-client")
        sock.sendall(encode_request(header, build(request_schema(api_key, version), body)))
        try:
            frame = FrameDecoder().pull(sock.recv)
        except EOFError:
            raise AuthenticationFailed(
                "the broker closed the connection during authentication"
            ) from None
        got, response = parse_response(api_key, version, frame)
        if got != cid:
            raise AuthenticationFailed(f"correlation id {got} is not {cid}")
        return response

    return request
