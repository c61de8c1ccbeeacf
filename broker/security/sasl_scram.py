"""SASL/SCRAM-SHA-256 and -512 (RFC 5802, RFC 7677) on the server, on ``scramp``.

Two rounds, as Kafka's ScramSaslServer: client-first -> server-first, client-final
-> server-final. Credentials come from the CredentialCache (``/config/users/<user>``
in Kafka's stored form), so the password is never known to the broker. Channel
binding is not offered (Kafka's clients send ``n,,``).
"""

from __future__ import annotations

from scramp import ScramException, ScramMechanism

from .credential_cache import CredentialCache
from .sasl_errors import SaslAuthenticationError


def _saslname(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma and ``=3D`` an equals sign."""
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    credential_expiration_ms = None  # only delegation tokens expire, and Quill has none

    def __init__(self, mechanism: str, credentials: CredentialCache) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._round = 0
        self._username: str | None = None
        self.complete = False
        self.authorization_id: str | None = None

    def _auth_info(self, username: str):
        self._username = _saslname(username)
        cred = self._credentials.get(self._username, self.mechanism)
        if cred is None:
            raise ScramException("unknown user")
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def _failed(self, detail: str) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            "Authentication failed during authentication due to invalid credentials "
            f"with SASL mechanism {self.mechanism}",
            self._username,
            detail,
        )

    def _accept_kafka_nonce(self, client_final: str) -> None:
        sent = getattr(self._server, "nonce", None)
        if sent is None:
            return
        for attr in client_final.split(","):
            if attr.startswith("r="):
                nonce = attr[2:]
                if nonce != str(sent) and nonce.endswith(str(sent)):
                    self._server.nonce = type(sent)(nonce)
                return

    def evaluate(self, token: bytes) -> bytes:
        if self.complete or self._round > 1:
            raise SaslAuthenticationError(f"{self.mechanism} authentication already complete")
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                f"Invalid {self.mechanism} message: not UTF-8", self._username
            ) from None
        self._round += 1
        try:
            if self._round == 1:
                self._server.set_client_first(message)
                return self._server.get_server_first().encode()
            self._accept_kafka_nonce(message)
            self._server.set_client_final(message)
            final = self._server.get_server_final().encode()
        except ScramException as exc:
            raise self._failed(str(exc)) from None
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            # scramp's parsers let some malformed messages through as Python errors
            raise SaslAuthenticationError(
                f"Invalid {self.mechanism} message", self._username
            ) from None
        self.authorization_id = self._username
        self.complete = True
        return final
