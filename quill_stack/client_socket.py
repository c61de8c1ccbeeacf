"""A blocking socket to one broker, secured as the environment's client config says.

The console's protocol socket (console/cluster/wire.py) and the stack's health checks
speak the Kafka protocol on plain sockets. On a SSL or SASL_SSL listener the socket is
wrapped in TLS (verified against ``ssl.ca.location``, host name checked as librdkafka
does by default); on a SASL listener it then authenticates as any Kafka client does:
SaslHandshake v1 naming the mechanism, then SaslAuthenticate v2 carrying PLAIN's token
or SCRAM's four messages (scramp does the SCRAM arithmetic). Failure raises
``AuthenticationError`` with the broker's sentence; the socket is closed.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping

import scramp

from broker.protocol.messages import (
    RequestHeader,
    build,
    encode_request,
    parse_response,
    request_schema,
)
from quill_stack.client_security import librdkafka_config, uses_sasl, uses_tls

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SASL_HANDSHAKE_V, SASL_AUTHENTICATE_V = 1, 2
_SIZE = struct.Struct(">i")


class AuthenticationError(ConnectionError):
    """The broker refused our TLS or SASL credentials."""


def tls_context(conf: Mapping[str, str]) -> ssl.SSLContext:
    """Verify the broker against ssl.ca.location (the system's CAs without one)."""
    context = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
    # librdkafka's default is "https" (check the name); "none" turns it off, as there.
    if conf.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
        context.check_hostname = False
    return context


def connect(
    address: tuple[str, int], timeout: float, conf: Mapping[str, str] | None = None
) -> socket.socket:
    """An open socket to `address`, through TLS and SASL when `conf` (default: the
    environment's, see quill_stack.client_security) asks for them."""
    conf = librdkafka_config() if conf is None else conf
    sock = socket.create_connection(address, timeout=timeout)
    try:
        if uses_tls(conf):
            sock = tls_context(conf).wrap_socket(sock, server_hostname=address[0])
        if uses_sasl(conf):
            authenticate(sock, conf)
    except BaseException:
        sock.close()
        raise
    return sock


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(left)
        if not chunk:
            raise AuthenticationError(f"{sock.getpeername()} closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _call(sock: socket.socket, api_key: int, version: int, body: dict, cid: int):
    header = RequestHeader(api_key, version, cid, "quill-client")
    sock.sendall(encode_request(header, build(request_schema(api_key, version), body)))
    size = _SIZE.unpack(_recv(sock, 4))[0]
    got, response = parse_response(api_key, version, _recv(sock, size))
    if got != cid:
        raise AuthenticationError(f"correlation id {got} is not {cid}")
    return response


def _token(sock: socket.socket, token: bytes, cid: int) -> bytes:
    response = _call(sock, SASL_AUTHENTICATE, SASL_AUTHENTICATE_V, {"auth_bytes": token}, cid)
    if response.error_code != 0:
        raise AuthenticationError(
            f"SASL authentication failed ({response.error_code.name.upper()}): "
            f"{response.error_message or 'no reason given'}"
        )
    return response.auth_bytes


def authenticate(sock: socket.socket, conf: Mapping[str, str]) -> None:
    """SaslHandshake then SaslAuthenticate as conf's sasl.username with sasl.mechanism."""
    mechanism = conf.get("sasl.mechanism", "PLAIN").upper()
    user, password = conf["sasl.username"], conf["sasl.password"]
    answer = _call(sock, SASL_HANDSHAKE, SASL_HANDSHAKE_V, {"mechanism": mechanism}, 1)
    if answer.error_code != 0:
        enabled = ", ".join(answer.mechanisms) or "none"
        raise AuthenticationError(
            f"the broker does not accept SASL mechanism {mechanism} "
            f"({answer.error_code.name.upper()}; enabled: {enabled})"
        )
    if mechanism == "PLAIN":
        _token(sock, b"\0" + user.encode() + b"\0" + password.encode(), 2)
        return
    client = scramp.ScramClient([mechanism], user, password)
    first = _token(sock, client.get_client_first().encode(), 2)
    try:
        client.set_server_first(first.decode())
        final = _token(sock, client.get_client_final().encode(), 3)
        client.set_server_final(final.decode())
    except scramp.ScramException as exc:
        raise AuthenticationError(f"SCRAM exchange with the broker failed: {exc}") from None
