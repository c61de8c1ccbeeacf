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

The answer is checked the way a Kafka client checks it at start (a protocol it knows, a
SASL mechanism with a user and password, a CA file that exists), so a typo fails with a
sentence naming the variable instead of a client that retries forever.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from broker.cli.common import read_properties_file

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
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class ClientSecurityError(ValueError):
    """The environment's client security settings cannot work; the message says why."""


def _source(key: str, environ: Mapping[str, str]) -> str:
    """Where a property came from, for error messages."""
    for env, prop in ENV_PROPERTIES.items():
        if prop == key and environ.get(env):
            return env
    return f"{key} in {environ.get(CONFIG_FILE_ENV)}"


def librdkafka_config(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client properties the environment gives (``{}``: plaintext, no credentials)."""
    environ = os.environ if environ is None else environ
    conf: dict[str, str] = {}
    path = environ.get(CONFIG_FILE_ENV, "").strip()
    if path:
        if not Path(path).is_file():
            raise ClientSecurityError(f"{CONFIG_FILE_ENV}={path}: no such file.")
        conf.update(read_properties_file(path))
    for env, prop in ENV_PROPERTIES.items():
        if environ.get(env, "").strip():
            conf[prop] = environ[env].strip()
    _check(conf, environ)
    return conf


def _check(conf: dict[str, str], environ: Mapping[str, str]) -> None:
    protocol = conf.get("security.protocol")
    if protocol is None:
        if any(k.startswith("sasl.") for k in conf):
            raise ClientSecurityError(
                "SASL credentials are set but security.protocol is not: set "
                "QUILL_SECURITY_PROTOCOL=SASL_SSL (or SASL_PLAINTEXT)."
            )
        return
    protocol = conf["security.protocol"] = protocol.upper()
    if protocol not in PROTOCOLS:
        raise ClientSecurityError(
            f"{_source('security.protocol', environ)}: unknown security protocol "
            f"{protocol!r}; Kafka's are {', '.join(PROTOCOLS)}."
        )
    if protocol.startswith("SASL_"):
        mechanism = conf.setdefault("sasl.mechanism", "PLAIN").upper()  # Kafka's default
        conf["sasl.mechanism"] = mechanism
        if mechanism not in MECHANISMS:
            raise ClientSecurityError(
                f"{_source('sasl.mechanism', environ)}: unsupported SASL mechanism "
                f"{mechanism!r}; choose {', '.join(MECHANISMS)}."
            )
        for key, env in (
            ("sasl.username", "QUILL_SASL_USERNAME"),
            ("sasl.password", "QUILL_SASL_PASSWORD"),
        ):
            if not conf.get(key):
                raise ClientSecurityError(f"{protocol} needs {key}: set {env}.")
    ca = conf.get("ssl.ca.location")
    if ca and not Path(ca).is_file():
        raise ClientSecurityError(f"{_source('ssl.ca.location', environ)}: no such file {ca}.")


def uses_tls(conf: Mapping[str, str]) -> bool:
    return conf.get("security.protocol", "PLAINTEXT") in ("SSL", "SASL_SSL")


def uses_sasl(conf: Mapping[str, str]) -> bool:
    return conf.get("security.protocol", "PLAINTEXT").startswith("SASL_")
