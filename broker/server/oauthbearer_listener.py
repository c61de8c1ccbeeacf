"""The token validator an OAUTHBEARER listener uses, from Kafka's keys.

* ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` unset (or Kafka's
  OAuthBearerUnsecuredValidatorCallbackHandler): unsecured JWTs, with the JAAS options
  of ``listener.name.<l>.oauthbearer.sasl.jaas.config`` (OAuthBearerLoginModule).
* Kafka's OAuthBearerValidatorCallbackHandler (either package name): OIDC (KIP-768),
  with ``sasl.oauthbearer.jwks.endpoint.url`` (required), its refresh and retry keys,
  ``sasl.oauthbearer.expected.issuer``/``expected.audience``, ``sub.claim.name``,
  ``scope.claim.name`` and ``clock.skew.seconds``, each read as Kafka reads them
  (``listener.name.<l>.oauthbearer.<key>``, then ``listener.name.<l>.<key>``, then the
  broker's ``<key>``).

Any other handler class, login module or JAAS option refuses start-up, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..security.jaas import JaasConfig
from ..security.jwks import JwksCache
from ..security.oauthbearer import TokenValidator
from ..security.oauthbearer_tokens import UNSECURED_OPTIONS, JwtValidator, UnsecuredValidator
from .config_keys import ConfigError

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)
OIDC_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
)
OIDC_KEYS = (
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
)
#: the login module's own options (a broker connecting to others as a client)
LOGIN_OPTIONS = ("unsecuredLoginStringClaim_", "unsecuredLoginNumberClaim_", "unsecuredLogin")


def oauth_validator(
    jaas: JaasConfig | None, handler: str | None, value: Callable[[str], Any], where: str
) -> TokenValidator:
    """``value(key)``: the listener's value of a ``sasl.oauthbearer.*`` key; ``where``
    names the listener in errors."""
    options = dict(jaas.options) if jaas is not None else {}
    if jaas is not None and jaas.login_module != OAUTHBEARER_LOGIN_MODULE:
        raise ConfigError(
            f"{where}: the OAUTHBEARER JAAS login module must be {OAUTHBEARER_LOGIN_MODULE}"
        )
    unknown = [k for k in options if k not in UNSECURED_OPTIONS and not k.startswith(LOGIN_OPTIONS)]
    if unknown:
        raise ConfigError(
            f"{where}: unknown OAuthBearerLoginModule option(s) {', '.join(sorted(unknown))} "
            f"(the validator takes {', '.join(sorted(UNSECURED_OPTIONS))})"
        )
    settings = {k: value(k) for k in OIDC_KEYS}  # read (and so checked) on every listener
    handler = (handler or "").strip()
    if handler in ("", UNSECURED_HANDLER):
        try:
            return UnsecuredValidator(options)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    if handler not in OIDC_HANDLERS:
        raise ConfigError(
            f"{where}: sasl.server.callback.handler.class={handler} is not one Quill has "
            f"({', '.join((UNSECURED_HANDLER, *OIDC_HANDLERS))})"
        )
    url = settings["sasl.oauthbearer.jwks.endpoint.url"]
    if not url:
        raise ConfigError(
            f"{where}: {handler.rsplit('.', 1)[-1]} needs sasl.oauthbearer.jwks.endpoint.url"
        )
    try:
        keys = JwksCache(
            url,
            settings["sasl.oauthbearer.jwks.endpoint.refresh.ms"],
            settings["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"],
            settings["sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"],
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: sasl.oauthbearer.jwks.endpoint.url={exc}") from None
    return JwtValidator(
        keys,
        settings["sasl.oauthbearer.expected.issuer"],
        settings["sasl.oauthbearer.expected.audience"],
        settings["sasl.oauthbearer.sub.claim.name"],
        settings["sasl.oauthbearer.scope.claim.name"],
        settings["sasl.oauthbearer.clock.skew.seconds"],
    )
