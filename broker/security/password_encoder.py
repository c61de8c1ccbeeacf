"""Kafka's PasswordEncoder: dynamic password configs are stored in ZooKeeper encrypted
with the broker's static ``password.encoder.secret``.

As Kafka writes them: AES/CBC/PKCS5Padding with a key derived from the secret by
PBKDF2WithHmacSHA512 (128-bit key, 4096 iterations, a random 256-byte salt), stored as
``keyFactoryAlgorithm:...,cipherAlgorithm:...,keyLength:...,salt:...,iterations:...,
encryptedPassword:...,passwordLength:...,initializationVector:...`` (base64 values).
"""

from __future__ import annotations

import base64
import os

from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

KEY_FACTORY = "PBKDF2WithHmacSHA512"
CIPHER = "AES/CBC/PKCS5Padding"
KEY_LENGTH = 128
ITERATIONS = 4096
SALT_BYTES = 256


class PasswordEncoderError(ValueError):
    """A stored password this secret cannot decode."""


def _key(secret: str, salt: bytes, key_length: int, iterations: int) -> bytes:
    kdf = PBKDF2HMAC(hashes.SHA512(), key_length // 8, salt, iterations)
    return kdf.derive(secret.encode())


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode(secret: str, password: str) -> str:
    salt, iv = os.urandom(SALT_BYTES), os.urandom(16)
    padder = padding.PKCS7(128).padder()
    data = padder.update(password.encode()) + padder.finalize()
    enc = Cipher(algorithms.AES(_key(secret, salt, KEY_LENGTH, ITERATIONS)), modes.CBC(iv))
    encryptor = enc.encryptor()
    encrypted = encryptor.update(data) + encryptor.finalize()
    fields = {
        "keyFactoryAlgorithm": KEY_FACTORY,
        "cipherAlgorithm": CIPHER,
        "keyLength": str(KEY_LENGTH),
        "salt": _b64(salt),
        "iterations": str(ITERATIONS),
        "encryptedPassword": _b64(encrypted),
        "passwordLength": str(len(password)),
        "initializationVector": _b64(iv),
    }
    return ",".join(f"{k}:{v}" for k, v in fields.items())


def decode(secret: str, encoded: str) -> str:
    try:
        fields = dict(item.split(":", 1) for item in encoded.split(","))
        if fields["keyFactoryAlgorithm"] != KEY_FACTORY or fields["cipherAlgorithm"] != CIPHER:
            raise PasswordEncoderError(
                f"unsupported {fields['keyFactoryAlgorithm']} / {fields['cipherAlgorithm']}"
            )
        key = _key(
            secret,
            base64.b64decode(fields["salt"]),
            int(fields["keyLength"]),
            int(fields["iterations"]),
        )
        iv = base64.b64decode(fields["initializationVector"])
        decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
        data = decryptor.update(base64.b64decode(fields["encryptedPassword"]))
        data += decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        password = (unpadder.update(data) + unpadder.finalize()).decode()
    except PasswordEncoderError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        raise PasswordEncoderError(f"cannot decode the stored password: {exc}") from None
    if len(password) != int(fields["passwordLength"]):
        raise PasswordEncoderError("cannot decode the stored password: wrong secret")
    return password
