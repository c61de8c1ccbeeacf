r"""TLS contexts from Kafka's key and trust store settings (Python's ``ssl``).

Keystore: ``ssl.keystore.location`` of ``ssl.keystore.type`` JKS (Kafka's default),
PKCS12 (both opened with ``ssl.keystore.password``, a JKS key with ``ssl.key.password``)
or PEM (a file holding the private key and the certificate chain, the key optionally
encrypted with ``ssl.key.password``); or ``ssl.keystore.certificate.chain`` +
``ssl.keystore.key`` (PEM text, type PEM). Truststore: ``ssl.truststore.location`` of
``ssl.truststore.type`` JKS, PKCS12 (``ssl.truststore.password``) or PEM (CA
certificates), or ``ssl.truststore.certificates`` (PEM text). See ``keystores``.

A leaf certificate signed with SHA-1, which OpenSSL's default security level refuses
(CA_MD_TOO_WEAK) and Java accepts, is accepted as Kafka does, with a warning: the
context's security level is lowered to 0. PEM text from a properties file may have lost
its line breaks (a ``\`` continuation joins the lines, as Java's Properties does); it is
re-wrapped before OpenSSL reads it.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .keystores import (
    KeyStoreError,
    keystore_pem,
    pem_chain,
    store_type,
    truststore_pem,
    weak_signature,
)

log = logging.getLogger(__name__)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# Python's default cipher string, at security level 0 (SHA-1 signatures allowed)
_LEVEL_0_CIPHERS = (
    "@SECLEVEL=0:ECDH+AESGCM:ECDH+CHACHA20:ECDH+AES:DHE+AES:!aNULL:!eNULL:!aDSS:!SHA1:!AESCCM"
)


class SslConfigError(ValueError):
    """A TLS setting the broker (or a client) cannot use; the message names the key."""


def _accept_weak_leaf(ctx: ssl.SSLContext, chain, what: str) -> None:
    weak = weak_signature(chain)
    if weak is None:
        return
    log.warning(
        "%s: the certificate %s is signed with %s, which OpenSSL refuses by default; "
        "accepted as Kafka accepts it (reissue it with SHA-256)",
        what,
        chain[0].subject.rfc4514_string(),
        weak,
    )
    ctx.set_ciphers(_LEVEL_0_CIPHERS)


def _keystore_material(
    settings: Mapping[str, Any], prefix: str
) -> tuple[str, str | None, list, str] | None:
    """(PEM text of the key and chain, the key's password, the chain, what to name in
    messages) of the ``ssl.keystore.*`` settings; None when no keystore is set."""
    location = settings.get("ssl.keystore.location")
    chain = settings.get("ssl.keystore.certificate.chain")
    key = settings.get("ssl.keystore.key")
    password = settings.get("ssl.key.password") or None
    what = f"{prefix}ssl.keystore.location={location}" if location else f"{prefix}ssl.keystore"
    try:
        kind = store_type(settings.get("ssl.keystore.type"), f"{prefix}ssl.keystore.type")
        if chain or key:
            if kind != "PEM":
                raise SslConfigError(
                    f"{prefix}ssl.keystore.certificate.chain and {prefix}ssl.keystore.key "
                    f"need {prefix}ssl.keystore.type=PEM"
                )
            if not (chain and key):
                raise SslConfigError(
                    f"{prefix}ssl.keystore.certificate.chain and {prefix}ssl.keystore.key "
                    "go together"
                )
            certs = pem_chain(normalize_pem(chain))
            return normalize_pem(key) + normalize_pem(chain), password, certs, what
        if not location:
            return None
        if kind == "PEM":
            text = Path(location).read_text(errors="replace")
            return text, password, pem_chain(text), what
        store_password = settings.get("ssl.keystore.password") or None
        text, certs = keystore_pem(location, kind, store_password, password, prefix)
        return text, None, certs, what
    except KeyStoreError as exc:
        raise SslConfigError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise SslConfigError(f"cannot load the key and certificate of {what}: {exc}") from None


def keystore_certificate(settings: Mapping[str, Any], prefix: str = ""):
    """The leaf certificate of the ``ssl.keystore.*`` settings (None: no keystore)."""
    material = _keystore_material(settings, prefix)
    if material is None or not material[2]:
        return None
    return material[2][0]


def _load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, Any], prefix: str) -> bool:
    material = _keystore_material(settings, prefix)
    if material is None:
        return False
    text, password, certs, what = material
    _accept_weak_leaf(ctx, certs, what)
    try:
        _load_pem_text(ctx, text, password)
    except (OSError, ssl.SSLError) as exc:
        raise SslConfigError(f"cannot load the key and certificate of {what}: {exc}") from None
    return True


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


def _load_pem_text(ctx: ssl.SSLContext, text: str, password: str | None) -> None:
    """ssl reads key and chain from files only: a private temporary file, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def truststore_cadata(
    settings: Mapping[str, Any], prefix: str = ""
) -> tuple[str | None, str | None]:
    """(CA file, CA PEM text) of ``ssl.truststore.*``, (None, None) when unset."""
    location = settings.get("ssl.truststore.location")
    certificates = settings.get("ssl.truststore.certificates")
    kind = store_type(settings.get("ssl.truststore.type"), f"{prefix}ssl.truststore.type")
    if certificates:
        if kind != "PEM":
            raise KeyStoreError(
                f"{prefix}ssl.truststore.certificates needs {prefix}ssl.truststore.type=PEM"
            )
        return None, normalize_pem(certificates)
    if not location:
        return None, None
    if kind == "PEM":
        return location, None
    password = settings.get("ssl.truststore.password") or None
    return None, truststore_pem(location, kind, password, prefix)


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, Any], prefix: str) -> bool:
    try:
        cafile, cadata = truststore_cadata(settings, prefix)
        if cafile is None and cadata is None:
            return False
        ctx.load_verify_locations(cafile=cafile, cadata=cadata)
        return True
    except KeyStoreError as exc:
        raise SslConfigError(str(exc)) from None
    except (OSError, ssl.SSLError) as exc:
        raise SslConfigError(f"cannot load {prefix}ssl.truststore: {exc}") from None


def server_context(settings: Mapping[str, Any], prefix: str = "") -> ssl.SSLContext:
    """A listener's context; ``prefix`` (``listener.name.x.``) only shapes messages."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_keystore(ctx, settings, prefix):
        raise SslConfigError(
            f"a TLS listener needs {prefix}ssl.keystore.location (JKS, PKCS12 or PEM) "
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
