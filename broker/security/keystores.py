"""Kafka's key and trust stores, read into the PEM that OpenSSL (Python's ``ssl``) takes.

``ssl.keystore.type`` / ``ssl.truststore.type``, as Kafka's DefaultSslEngineFactory:

- ``JKS`` (Kafka's default): Java's keystore, read with pyjks. The store's integrity is
  checked with ``ssl.keystore.password`` / ``ssl.truststore.password`` (a truststore
  without a password is read unchecked, as Java does); a private key entry is decrypted
  with ``ssl.key.password``, else the store password.
- ``PKCS12``: read with ``cryptography``, decrypted with the store password.
- ``PEM``: the file itself (a key and its chain, or CA certificates).

A wrong password or an unreadable store is a KeyStoreError naming the key to fix.
"""

from __future__ import annotations

from pathlib import Path

import jks
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12

TYPES = ("JKS", "PKCS12", "PEM")
_PEM = serialization.Encoding.PEM


class KeyStoreError(ValueError):
    """A store that cannot be read; the message names the setting."""


def store_type(value: str | None, key: str) -> str:
    kind = (value or "JKS").upper()
    if kind not in TYPES:
        raise KeyStoreError(f"{key}={value} is not one of {', '.join(TYPES)}")
    return kind


def _read(location: str, key: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise KeyStoreError(f"cannot read {key}={location}: {exc.strerror}") from None


def _certs_pem(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(_PEM).decode() for c in certs)


def _key_pem(key) -> str:
    return key.private_bytes(
        _PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _load_jks(data: bytes, location: str, password: str | None, password_key: str):
    try:
        return jks.KeyStore.loads(data, password, try_decrypt_keys=False)
    except jks.KeystoreSignatureException:
        raise KeyStoreError(
            f"{password_key} is wrong for the JKS store {location} (its integrity check fails)"
        ) from None
    except (jks.KeystoreException, ValueError) as exc:
        raise KeyStoreError(f"{location} is not a JKS keystore: {exc}") from None


def _load_pkcs12(data: bytes, location: str, password: str | None, password_key: str):
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        if not password:
            raise KeyStoreError(
                f"the PKCS12 store {location} needs {password_key}: {exc}"
            ) from None
        raise KeyStoreError(
            f"{password_key} is wrong for the PKCS12 store {location}, or it is not PKCS12"
        ) from None


def keystore_pem(
    location: str, kind: str, store_password: str | None, key_password: str | None, prefix: str = ""
) -> tuple[str, list[x509.Certificate]]:
    """(unencrypted PKCS#8 key PEM + chain PEM, the chain) of the store's private key entry."""
    data = _read(location, f"{prefix}ssl.keystore.location")
    password_key = f"{prefix}ssl.keystore.password"
    if kind == "JKS":
        store = _load_jks(data, location, store_password, password_key)
        if not store.private_keys:
            raise KeyStoreError(f"the JKS keystore {location} holds no private key entry")
        entry = next(iter(store.private_keys.values()))
        try:
            entry.decrypt(key_password or store_password or "")
        except jks.DecryptionFailureException:
            which = "ssl.key.password" if key_password else "ssl.keystore.password"
            raise KeyStoreError(
                f"{prefix}{which} does not decrypt the key '{entry.alias}' of {location}"
            ) from None
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        chain = [x509.load_der_x509_certificate(der) for _kind, der in entry.cert_chain]
    else:
        loaded = _load_pkcs12(data, location, store_password, password_key)
        if loaded.key is None or loaded.cert is None:
            raise KeyStoreError(f"the PKCS12 keystore {location} holds no private key entry")
        key = loaded.key
        chain = [loaded.cert.certificate, *(c.certificate for c in loaded.additional_certs)]
    return _key_pem(key) + _certs_pem(chain), chain


def truststore_pem(location: str, kind: str, password: str | None, prefix: str = "") -> str:
    """The trusted certificates of a JKS or PKCS12 store, as PEM."""
    data = _read(location, f"{prefix}ssl.truststore.location")
    password_key = f"{prefix}ssl.truststore.password"
    if kind == "JKS":
        store = _load_jks(data, location, password, password_key)
        certs = [x509.load_der_x509_certificate(e.cert) for e in store.certs.values()]
        for entry in store.private_keys.values():  # Java trusts a key entry's own certificate
            certs += [x509.load_der_x509_certificate(der) for _kind, der in entry.cert_chain[:1]]
    else:
        loaded = _load_pkcs12(data, location, password, password_key)
        certs = [c.certificate for c in loaded.additional_certs]
        if loaded.cert is not None:
            certs.insert(0, loaded.cert.certificate)
    if not certs:
        raise KeyStoreError(f"the {kind} truststore {location} holds no certificate")
    return _certs_pem(certs)


def pem_chain(text: str) -> list[x509.Certificate]:
    """The certificates of a PEM text (the key blocks skipped)."""
    try:
        return x509.load_pem_x509_certificates(text.encode())
    except ValueError:
        return []


def weak_signature(chain: list[x509.Certificate]) -> str | None:
    """'SHA1' (or 'MD5') when the leaf is signed with a digest OpenSSL's default security
    level refuses (CA_MD_TOO_WEAK), which Java, and so Kafka, still accept."""
    if not chain:
        return None
    algorithm = chain[0].signature_hash_algorithm
    if isinstance(algorithm, hashes.SHA1 | hashes.MD5):
        return algorithm.name.upper()
    return None
