"""OAUTHBEARER for our own clients (the broker towards its peers, the CLIs): unsecured
JWTs (alg ``none``), as Kafka's OAuthBearerUnsecuredLoginCallbackHandler and
librdkafka's built-in unsecured token make them. For development listeners that take
unsecured tokens; a token endpoint (OIDC client credentials) is not spoken.

Two spellings of the same thing:

* librdkafka's ``sasl.oauthbearer.config``: ``principal=alice scope=a,b lifeSeconds=600
  principalClaimName=sub scopeClaimName=scope extension_traceId=x``;
* the Java client's JAAS options of OAuthBearerLoginModule:
  ``unsecuredLoginStringClaim_sub="alice"``, ``unsecuredLoginListClaim_scope=",a,b"``
  (the first character is the separator), ``unsecuredLoginNumberClaim_<name>``,
  ``unsecuredLoginLifetimeSeconds``, ``unsecuredLoginPrincipalClaimName``,
  ``unsecuredLoginExtension_<name>``.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field


class OAuthConfigError(ValueError):
    """Unsecured token settings that cannot make a token; the message names the option."""


@dataclass(frozen=True)
class UnsecuredLogin:
    claims: dict = field(default_factory=dict)  # without iat/exp: those are made per token
    principal_claim: str = "sub"
    life_seconds: int = 3600
    extensions: dict = field(default_factory=dict)

    @property
    def principal(self) -> str | None:
        value = self.claims.get(self.principal_claim)
        return value if isinstance(value, str) and value else None

    def token(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        body = {**self.claims, "iat": now, "exp": now + self.life_seconds}
        return f"{_b64({'alg': 'none'})}.{_b64(body)}."

    def librdkafka_config(self) -> str:
        """The same as librdkafka's ``sasl.oauthbearer.config`` (string claims other
        than the principal and the scope are not carried by it)."""
        parts = [f"principalClaimName={self.principal_claim}", f"principal={self.principal}"]
        scope = self.claims.get("scope")
        if isinstance(scope, list) and scope:
            parts.append("scope=" + ",".join(scope))
        parts.append(f"lifeSeconds={self.life_seconds}")
        parts += [f"extension_{k}={v}" for k, v in self.extensions.items()]
        return " ".join(parts)

    @classmethod
    def from_librdkafka(cls, text: str) -> UnsecuredLogin:
        options: dict[str, str] = {}
        for item in text.split():
            key, sep, value = item.partition("=")
            if not sep or not value:
                raise OAuthConfigError(f"sasl.oauthbearer.config: {item!r} is not name=value")
            options[key] = value
        principal_claim = options.pop("principalClaimName", "sub")
        scope_claim = options.pop("scopeClaimName", "scope")
        claims: dict = {}
        if "principal" in options:
            claims[principal_claim] = options.pop("principal")
        if "scope" in options:
            claims[scope_claim] = [s for s in options.pop("scope").split(",") if s]
        life = _int(options.pop("lifeSeconds", "3600"), "sasl.oauthbearer.config lifeSeconds")
        extensions = {
            k[len("extension_") :]: options.pop(k)
            for k in list(options)
            if k.startswith("extension_")
        }
        if options:
            raise OAuthConfigError(
                f"sasl.oauthbearer.config: unknown option(s) {', '.join(sorted(options))}"
            )
        return cls(claims, principal_claim, life, extensions).check("principal=")

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> UnsecuredLogin:
        claims: dict = {}
        extensions: dict = {}
        for key, value in options.items():
            kind, _, name = key.partition("_")
            if kind == "unsecuredLoginStringClaim" and name:
                claims[name] = value
            elif kind == "unsecuredLoginNumberClaim" and name:
                claims[name] = _number(value, key)
            elif kind == "unsecuredLoginListClaim" and name:
                claims[name] = [s for s in value[1:].split(value[:1]) if s] if value else []
            elif kind == "unsecuredLoginExtension" and name:
                extensions[name] = value
        principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
        life = _int(
            options.get("unsecuredLoginLifetimeSeconds", "3600"), "unsecuredLoginLifetimeSeconds"
        )
        return cls(claims, principal_claim, life, extensions).check(
            f"unsecuredLoginStringClaim_{principal_claim}="
        )

    def check(self, principal_option: str) -> UnsecuredLogin:
        if self.principal is None:
            raise OAuthConfigError(f"an unsecured OAUTHBEARER token needs {principal_option}")
        if self.life_seconds <= 0:
            raise OAuthConfigError("the token's lifetime must be above 0 seconds")
        return self


def _b64(obj: dict) -> str:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _int(text: str, name: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise OAuthConfigError(f"{name}={text!r} is not a whole number") from None


def _number(text: str, name: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise OAuthConfigError(f"{name}={text!r} is not a number") from None
