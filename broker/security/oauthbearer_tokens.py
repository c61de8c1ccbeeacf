"""The two OAUTHBEARER token validators Kafka ships, on PyJWT.

* ``UnsecuredValidator``: Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (KIP-255,
  the default when no handler is configured; for development only). Takes unsigned JWTs
  (``alg`` ``none``, empty signature) with its JAAS options
  ``unsecuredValidatorPrincipalClaimName`` (default ``sub``),
  ``unsecuredValidatorScopeClaimName`` (default ``scope``),
  ``unsecuredValidatorRequiredScope`` (space-separated) and
  ``unsecuredValidatorAllowableClockSkewMs`` (default 0).
* ``JwtValidator``: Kafka's OAuthBearerValidatorCallbackHandler (KIP-768, OIDC). Takes
  signed JWTs (RS*/PS*/ES*; never ``none`` or HMAC) whose ``kid`` names a key of the
  JWKS (``jwks.py``); checks ``exp`` and ``iat`` (required), ``iss`` and ``aud`` when
  expected, within ``sasl.oauthbearer.clock.skew.seconds``; the principal is the
  ``sasl.oauthbearer.sub.claim.name`` claim.

Both raise TokenRefused with the reason; the broker logs it, the client gets
``{"status":"invalid_token"}``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jwt

from .oauthbearer import OAuthBearerToken, TokenRefused

UNSECURED_OPTIONS = {
    "unsecuredValidatorPrincipalClaimName",
    "unsecuredValidatorScopeClaimName",
    "unsecuredValidatorRequiredScope",
    "unsecuredValidatorAllowableClockSkewMs",
}
#: signed with a public key: what a JWKS can verify (no "none", no shared-secret HMAC)
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384")


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) of a compact JWS, unverified; TokenRefused if it is not one."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenRefused(f"Malformed JWT: {exc}") from None
    return header, claims


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """A scope claim as Kafka reads it: a string is one scope, a list is several."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(v for v in value if v.strip())
    raise TokenRefused(f"The scope claim '{name}' is not a string or a list of strings")


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenRefused(f"No principal name: the claim '{name}' is missing or not a string")
    return value


def _seconds(claims: Mapping[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenRefused(f"Required claim '{name}' is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRefused(f"The claim '{name}' is not a number")
    return float(value)


class UnsecuredValidator:
    kind = "unsecured"

    def __init__(self, options: Mapping[str, str]) -> None:
        """ValueError names a bad option (the broker refuses to start with it)."""
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip()
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope").strip()
        self.required_scope = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            self.clock_skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs={skew!r}: not a number"
            ) from None
        if self.clock_skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")
        if not self.principal_claim or not self.scope_claim:
            raise ValueError("the principal and scope claim names must not be empty")

    async def validate(self, token: str) -> OAuthBearerToken:
        header, claims = _unverified(token)
        if header.get("alg") != "none":
            raise TokenRefused("Unsecured JWS must have 'none' for an algorithm")
        if token.rsplit(".", 1)[-1]:
            raise TokenRefused("Unsecured JWS must not contain a digital signature")
        now_ms, skew = time.time() * 1000, self.clock_skew_ms
        exp = _seconds(claims, "exp", True)
        iat = _seconds(claims, "iat", False)
        if iat is not None and now_ms + skew < iat * 1000:
            raise TokenRefused(
                f"The Issued At value ({iat} seconds) was after the current time "
                f"({now_ms:.0f} ms) plus allowable clock skew ({skew} ms)"
            )
        if now_ms - skew >= exp * 1000:
            raise TokenRefused(
                f"The current time ({now_ms:.0f} ms) minus allowable clock skew ({skew} ms) "
                f"was on or after the Expiration Time value ({exp} seconds)"
            )
        if iat is not None and exp <= iat:
            raise TokenRefused(
                f"The Expiration Time ({exp} seconds) was not after the Issued At time "
                f"({iat} seconds)"
            )
        principal = _principal(claims, self.principal_claim)
        scope = _scope(claims, self.scope_claim)
        missing = sorted(self.required_scope - scope)
        if missing:
            raise TokenRefused(
                f"The provided scope ({' '.join(sorted(scope))}) was missing a required scope "
                f"({missing[0]}). All required scope elements: {' '.join(sorted(self.required_scope))}",
                "insufficient_scope",
                " ".join(sorted(self.required_scope)),
            )
        return OAuthBearerToken(principal, int(exp * 1000), scope)

    def close(self) -> None:
        pass


class JwtValidator:
    kind = "OIDC"

    def __init__(
        self,
        keys,  # jwks.JwksCache: ``await keys.key(kid)`` -> a PyJWK or None
        issuer: str | None = None,
        audiences: list[str] | None = None,
        sub_claim: str = "sub",
        scope_claim: str = "scope",
        clock_skew_s: int = 30,
    ) -> None:
        self._keys = keys
        self.issuer = issuer or None  # unset or empty: iss is not checked
        self.audiences = list(audiences or [])
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.clock_skew_s = clock_skew_s

    def close(self) -> None:
        self._keys.close()

    async def validate(self, token: str) -> OAuthBearerToken:
        header, _claims = _unverified(token)
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise TokenRefused(
                f"JWT algorithm {alg!r} is not allowed (allowed: {', '.join(ASYMMETRIC_ALGORITHMS)})"
            )
        if not isinstance(kid, str) or not kid:
            raise TokenRefused("JWT header has no 'kid' naming its key")
        key = await self._keys.key(kid)
        if key is None and not self._keys.loaded:
            raise TokenRefused(f"The JWKS {self._keys.url} could not be fetched")
        if key is None:
            raise TokenRefused(f"Unknown key id (kid) {kid!r}: not in the JWKS {self._keys.url}")
        kty = "EC" if alg.startswith("ES") else "RSA"
        if key.key_type != kty:
            raise TokenRefused(f"JWT algorithm {alg} does not fit key {kid!r} ({key.key_type})")
        try:
            claims = jwt.decode(
                token,
                key.key,  # the header's alg with this key (a JWK's own alg may be unset)
                algorithms=[alg],
                audience=self.audiences or None,
                issuer=self.issuer,
                leeway=self.clock_skew_s,
                options={"require": ["exp", "iat"], "verify_aud": bool(self.audiences)},
            )
        except (jwt.PyJWTError, TypeError, ValueError) as exc:  # PyJWT raises all three
            raise TokenRefused(f"JWT validation failed ({type(exc).__name__}): {exc}") from None
        principal = _principal(claims, self.sub_claim)
        return OAuthBearerToken(
            principal, int(_seconds(claims, "exp", True) * 1000), _scope(claims, self.scope_claim)
        )
