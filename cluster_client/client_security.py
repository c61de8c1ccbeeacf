"""The cluster credentials of Quill's own clients (console, monitor, workers, pipeline),
from the environment, as librdkafka configuration.

Every process that builds a Kafka client asks ``librdkafka_config()`` and merges the
answer into its client config; with nothing set the answer is ``{}`` and clients stay
PLAINTEXT, as before. Sources, later ones winning:

- ``QUILL_CLIENT_CONFIG``: a client properties file in Kafka's names, the same file
  ``--command-config`` takes (``quill-stack up`` with ``QUILL_SECURITY=sasl_ssl`` writes
  one for its admin user at ``.state/client-admin.properties``);
- ``QUILL_SECURITY_PROTOCOL``, ``QUILL_SASL_MECHANISM``, ``QUILL_SASL_USERNAME``,
  ``QUILL_SASL_PASSWORD``, ``QUILL_SSL_CA_LOCATION``: one client property each.

The answer is checked as the broker's own client checks its properties
(broker.client.security: a protocol it knows, a SASL mechanism with a user and
password) and for a CA file that exists, so a typo fails at start with a sentence naming
the variables instead of a client that retries forever.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from broker.cli.common import read_properties_file
from broker.client.security import PLAINTEXT, ClientSecurity
from broker.client.security import ClientSecurityError as BrokerClientSecurityError

#: env var -> client property (librdkafka's name, which is also the Java client's,
#: except ssl.ca.location: the Java client's PEM truststore)
ENV_PROPERTIES = {
    "QUILL_SECURITY_PROTOCOL": "security.protocol",
    "QUILL_SASL_MECHANISM": "sasl.mechanism",
    "QUILL_SASL_USERNAME": "sasl.username",
    "QUILL_SASL_PASSWORD": "sasl.password",
    "QUILL_SSL_CA_LOCATION": "ssl.ca.location",
}
CONFIG_FILE_ENV = "QUILL_CLIENT_CONFIG"


class ClientSecurityError(ValueError):
    """The environment's client security settings cannot work; the message says why."""


def librdkafka_config(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client properties the environment gives (``{}``: plaintext, no credentials),
    in librdkafka's names: a file in the Java client's (``sasl.jaas.config``, a PEM
    ``ssl.truststore.location``) works too."""
    conf, security = _load(os.environ if environ is None else environ)
    if security is None:
        return {}
    others = {k: v for k, v in conf.items() if not k.startswith(("ssl.", "sasl.", "security."))}
    return others | librdkafka_security(security)


def client_security(environ: Mapping[str, str] | None = None) -> ClientSecurity:
    """The environment's settings as the broker's own client takes them (PLAINTEXT when
    nothing is set): what the console's protocol socket connects with."""
    return _load(os.environ if environ is None else environ)[1] or PLAINTEXT


def _load(environ: Mapping[str, str]) -> tuple[dict[str, str], ClientSecurity | None]:
    conf: dict[str, str] = {}
    path = environ.get(CONFIG_FILE_ENV, "").strip()
    if path:
        if not Path(path).is_file():
            raise ClientSecurityError(f"{CONFIG_FILE_ENV}={path}: no such file.")
        conf.update(read_properties_file(path))
    for env, prop in ENV_PROPERTIES.items():
        if environ.get(env, "").strip():
            conf[prop] = environ[env].strip()
    return conf, (_check(conf, environ) if conf else None)


def librdkafka_security(security: ClientSecurity) -> dict[str, str]:
    """ClientSecurity as librdkafka's properties."""
    names = {
        "sasl_mechanism": "sasl.mechanism",
        "username": "sasl.username",
        "password": "sasl.password",
        "ssl_cafile": "ssl.ca.location",
        "ssl_cadata": "ssl.ca.pem",
        "ssl_certfile": "ssl.certificate.location",
        "ssl_keyfile": "ssl.key.location",
        "ssl_key_password": "ssl.key.password",
    }
    conf = {"security.protocol": security.security_protocol}
    conf |= {
        prop: str(getattr(security, field))
        for field, prop in names.items()
        if getattr(security, field) is not None
    }
    if security.oauthbearer is not None:  # unsecured tokens, made by librdkafka itself
        conf["sasl.oauthbearer.config"] = security.oauthbearer.librdkafka_config()
        conf["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    if security.tls and not security.ssl_check_hostname:
        conf["ssl.endpoint.identification.algorithm"] = "none"
    if security.tls and not security.ssl_verify:
        conf["enable.ssl.certificate.verification"] = "false"
    return conf


def _check(conf: dict[str, str], environ: Mapping[str, str]) -> ClientSecurity:
    """The checks the broker's own client makes (broker.client.security), plus a CA file
    that must exist; the message names the variables the settings came from."""
    try:
        security = ClientSecurity.from_properties(conf)
    except BrokerClientSecurityError as exc:
        raise ClientSecurityError(f"{_sources(environ)}: {exc}") from None
    if security.ssl_cafile and not Path(security.ssl_cafile).is_file():
        raise ClientSecurityError(
            f"{_sources(environ)}: ssl.ca.location: no such file {security.ssl_cafile}"
        )
    return security


def _sources(environ: Mapping[str, str]) -> str:
    names = [n for n in (CONFIG_FILE_ENV, *ENV_PROPERTIES) if environ.get(n, "").strip()]
    return "client security from " + ", ".join(names)
