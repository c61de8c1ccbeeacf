"""SCRAM credentials (RFC 5802) in Kafka's stored form.

Kafka keeps a user's SCRAM credentials in ``/config/users/<user>`` next to its quotas,
one config entry per mechanism::

    {"version":1,"config":{"SCRAM-SHA-512":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

(ScramCredentialUtils.credentialToString). The password itself is never stored:
``stored_key = H(HMAC(salted, "Client Key"))`` and ``server_key = HMAC(salted, "Server
Key")`` with ``salted = PBKDF2-HMAC(password, salt, iterations)``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

#: mechanism -> hashlib name, as Kafka's ScramMechanism
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's ScramMechanism.minIterations and its ceiling for AlterUserScramCredentials
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
#: Kafka's mechanism type ids on the wire (DescribeUserScramCredentials/Alter...)
MECHANISM_TYPES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config_value(self) -> str:
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_config_value(cls, mechanism: str, value: str) -> ScramCredential:
        """Parse Kafka's stored form; ValueError names what is wrong."""
        _check_mechanism(mechanism)
        fields: dict[str, str] = {}
        for part in value.split(","):
            key, sep, val = part.partition("=")
            if not sep:
                raise ValueError(f"{mechanism} credential: {part!r} is not key=value")
            fields[key.strip()] = val.strip()
        missing = {"salt", "stored_key", "server_key", "iterations"} - fields.keys()
        if missing:
            raise ValueError(f"{mechanism} credential lacks {', '.join(sorted(missing))}")
        try:
            return cls(
                mechanism,
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (ValueError, TypeError) as e:
            raise ValueError(f"{mechanism} credential is malformed: {e}") from None

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = DEFAULT_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        _check_mechanism(mechanism)
        check_iterations(iterations)
        salt = salt if salt is not None else os.urandom(32)
        salted = salted_password(mechanism, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted: bytes, iterations: int
    ) -> ScramCredential:
        """AlterUserScramCredentials sends (salt, salted password, iterations)."""
        name = MECHANISMS[mechanism]
        client_key = hmac.digest(salted, b"Client Key", name)
        stored_key = hashlib.new(name, client_key).digest()
        server_key = hmac.digest(salted, b"Server Key", name)
        return cls(mechanism, salt, stored_key, server_key, iterations)


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password, salt, iterations)


def check_iterations(iterations: int) -> None:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in MECHANISMS:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(sorted(MECHANISMS))}"
        )


def credentials_in(user_config: dict[str, str]) -> dict[str, ScramCredential]:
    """The SCRAM credentials held in a ``/config/users/<user>`` config map (quota keys
    live in the same map and are ignored here)."""
    return {
        mech: ScramCredential.from_config_value(mech, value)
        for mech, value in user_config.items()
        if mech in MECHANISMS
    }
