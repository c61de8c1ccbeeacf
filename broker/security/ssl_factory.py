r"""TLS contexts from Kafka's PEM key and trust store settings (Python's ``ssl``).

Keystore: ``ssl.keystore.location`` (a PEM file holding the private key and the
certificate chain) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (the PEM
text itself), the key optionally encrypted with ``ssl.key.password``. Truststore:
``ssl.truststore.location`` (a PEM file of CA certificates) or
``ssl.truststore.certificates`` (their PEM text). Only ``PEM`` store types are read:
JKS and PKCS12 are Java's, and refused with the key named. PEM text from a properties
file may have lost its line breaks (a ``\`` continuation joins the lines, as Java's
Properties does); it is re-wrapped before OpenSSL reads it.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
import textwrap
from collections.abc import Mapping
from typing import Any

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class SslConfigError(ValueError):
    """A TLS setting the broker (or a client) cannot use; the message names the key."""


def _load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, Any], prefix: str) -> bool:
    location = settings.get("ssl.keystore.location")
    chain = settings.get("ssl.keystore.certificate.chain")
    key = settings.get("ssl.keystore.key")
    password = settings.get("ssl.key.password") or None
    kind = (settings.get("ssl.keystore.type") or "PEM").upper()
    if (location or chain) and kind != "PEM":
        raise SslConfigError(f"{prefix}ssl.keystore.type={kind} is not supported; use PEM")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
            return True
        if chain or key:
            if not (chain and key):
                raise SslConfigError(
                    f"{prefix}ssl.keystore.certificate.chain and {prefix}ssl.keystore.key "
                    "go together"
                )
            _load_pem_text(ctx, chain, key, password)
            return True
    except (OSError, ssl.SSLError) as exc:
        what = f"{prefix}ssl.keystore.location={location}" if location else f"{prefix}ssl.keystore"
        raise SslConfigError(f"cannot load the key and certificate of {what}: {exc}") from None
    return False


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """Each PEM block with its base64 body re-wrapped at 64 columns."""
    blocks = [
        f"-----BEGIN {kind}-----\n"
        + "\n".join(textwrap.wrap("".join(body.split()), 64))
        + f"\n-----END {kind}-----\n"
        for kind, body in _PEM_BLOCK.findall(text)
    ]
    return "".join(blocks) or text


def _load_pem_text(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """ssl reads key and chain from files only: a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(normalize_pem(key) + normalize_pem(chain))
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, Any], prefix: str) -> bool:
    location = settings.get("ssl.truststore.location")
    certificates = settings.get("ssl.truststore.certificates")
    kind = (settings.get("ssl.truststore.type") or "PEM").upper()
    if (location or certificates) and kind != "PEM":
        raise SslConfigError(f"{prefix}ssl.truststore.type={kind} is not supported; use PEM")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
            return True
        if certificates:
            ctx.load_verify_locations(cadata=normalize_pem(certificates))
            return True
    except (OSError, ssl.SSLError) as exc:
        raise SslConfigError(f"cannot load {prefix}ssl.truststore: {exc}") from None
    return False


def server_context(settings: Mapping[str, Any], prefix: str = "") -> ssl.SSLContext:
    """A listener's context; ``prefix`` (``listener.name.x.``) only shapes messages."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_keystore(ctx, settings, prefix):
        raise SslConfigError(
            f"a TLS listener needs {prefix}ssl.keystore.location (PEM key and certificates) "
            f"or {prefix}ssl.keystore.certificate.chain and {prefix}ssl.keystore.key"
        )
    client_auth = (settings.get("ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise SslConfigError(
            f"{prefix}ssl.client.auth={client_auth} must be one of none, requested, required"
        )
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    if not _load_truststore(ctx, settings, prefix) and client_auth != "none":
        raise SslConfigError(
            f"{prefix}ssl.client.auth={client_auth} needs {prefix}ssl.truststore.location or "
            f"{prefix}ssl.truststore.certificates to verify client certificates"
        )
    return ctx


def client_context(
    cafile: str | None = None,
    cadata: str | None = None,
    certfile: str | None = None,
    keyfile: str | None = None,
    key_password: str | None = None,
    check_hostname: bool = True,
) -> ssl.SSLContext:
    """A client's context: trust ``cafile``/``cadata`` (else the system's CAs), present
    ``certfile``/``keyfile`` when given (mTLS)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = check_hostname
    if cafile or cadata:
        ctx.load_verify_locations(cafile=cafile or None, cadata=cadata or None)
    else:
        ctx.load_default_certs()
    if certfile:
        ctx.load_cert_chain(certfile, keyfile or None, password=key_password or None)
    return ctx


def broker_client_context(settings: Mapping[str, Any], prefix: str = "") -> ssl.SSLContext:
    """The context a broker connects to other brokers with: their listener's truststore
    to verify them, its own keystore to present (for ``ssl.client.auth``), host names
    checked unless ``ssl.endpoint.identification.algorithm`` is empty."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = (settings.get("ssl.endpoint.identification.algorithm") or "") != ""
    if not _load_truststore(ctx, settings, prefix):
        ctx.load_default_certs()
    _load_keystore(ctx, settings, prefix)
    return ctx
