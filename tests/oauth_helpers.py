"""Shared by the OAUTHBEARER tests: signing keys, the JWKS a tiny HTTP server on
127.0.0.1 serves for them, JWTs signed (or not) as an identity provider would, and the
RFC 7628 client initial response."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://idp.quill.test"
AUDIENCE = "quill-brokers"


class SigningKey:
    """A private key with its kid and JWS algorithm; ``jwk`` is its public JWK."""

    def __init__(self, kid: str, alg: str = "RS256") -> None:
        self.kid, self.alg = kid, alg
        if alg.startswith("ES"):
            self.private = ec.generate_private_key(ec.SECP256R1())
            algorithm = jwt.algorithms.ECAlgorithm
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            algorithm = jwt.algorithms.RSAAlgorithm
        self.jwk = {**algorithm.to_jwk(self.private.public_key(), as_dict=True), "kid": kid}
        self.jwk.update(alg=alg, use="sig")

    def token(self, sub: str, lifetime_s: float = 300, kid: str | None = None, **claims) -> str:
        """A signed JWT for ``sub`` (iss, aud, iat and exp set unless given)."""
        now = int(time.time())
        body = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now}
        body["exp"] = now + lifetime_s
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        headers = {"kid": kid or self.kid}
        return jwt.encode(body, self.private, algorithm=self.alg, headers=headers)


def unsecured_token(sub: str | None, lifetime_s: float = 300, **claims) -> str:
    """An unsecured JWS (alg none, empty signature), as librdkafka makes for
    ``sasl.oauthbearer.config=principal=...``."""
    now = time.time()
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return f"{_b64(json.dumps({'alg': 'none'}))}.{_b64(json.dumps(body))}."


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def client_first(token: str, authzid: str = "", **extensions: str) -> bytes:
    """RFC 7628's client initial response: gs2 header, auth=Bearer, kvpairs."""
    pairs = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    header = f"n,a={authzid}," if authzid else "n,,"
    return f"{header}\x01auth=Bearer {token}\x01{pairs}\x01".encode()


class JwksServer:
    """An HTTP server on 127.0.0.1 serving ``keys`` as a JWKS at /jwks.json, counting
    its fetches. Change ``keys`` to rotate; clear ``open`` to hold each answer (counted
    in ``held``) until it is set again."""

    def __init__(self, keys: list[SigningKey]) -> None:
        self.keys = list(keys)
        self.fetches = self.held = 0
        self.open = threading.Event()
        self.open.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if not outer.open.is_set():
                    outer.held += 1
                    outer.open.wait(60)
                outer.fetches += 1
                body = json.dumps({"keys": [k.jwk for k in outer.keys]}).encode()
                self.send_response(200 if self.path == "/jwks.json" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def oauth_conf(bootstrap: str, **extra) -> dict:
    """confluent-kafka settings for SASL_PLAINTEXT OAUTHBEARER."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **extra,
    }


def token_cb(make_token, claimed_lifetime_s: float | None = None):
    """confluent-kafka's oauth_cb: ``make_token()`` and its own ``exp`` (librdkafka
    refreshes the token at 80% of the lifetime it is told), or ``claimed_lifetime_s``
    from now (librdkafka takes no token it knows to be expired)."""

    def cb(_config):
        token = make_token()
        if claimed_lifetime_s is not None:
            return token, time.time() + claimed_lifetime_s
        return token, jwt.decode(token, options={"verify_signature": False})["exp"]

    return cb
