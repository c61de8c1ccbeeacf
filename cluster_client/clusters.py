"""The clusters one console manages, and the one a request (or job) works on now.

QUILL_CLUSTERS names them: JSON text, or the path of a JSON file, holding a list of
objects (Kafka's names for the keys)::

    [{"name": "prod", "bootstrap.servers": "b1:9092", "zookeeper.connect": "z1:2181/prod",
      "client.config": "/etc/quill/prod-client.properties",
      "zookeeper.jaas.config": "/etc/quill/prod-jaas.conf",
      "metrics.base.port": 9404, "metrics.ports": {"1": 9404},
      "schema.registry.url": "https://sr-prod:8081",
      "schema.registry.basic.auth.user.info": "user:password"}]

Without it, the single-cluster settings (QUILL_BOOTSTRAP_SERVERS, QUILL_ZOOKEEPER_*,
the client security variables, QUILL_METRICS_*) are the cluster named "default", read
afresh on each use. The first cluster listed is the default one: the console's URLs
without a /c/<name>/ prefix mean it.

The current cluster lives in a context variable: the console's middleware sets it per
request, jobs and alert checks set it from their record (``activate``); every client
in cluster_client asks ``current()`` instead of reading settings. Threads started by
hand do not inherit it: start them through ``in_context``.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker.cli.common import read_properties_file
from broker.zk.security import JAAS_CONFIG_ENV, ZkCredentials, credentials_from_env
from cluster_client.client_security import CONFIG_FILE_ENV, librdkafka_config
from cluster_client.errors import NotFound

DEFAULT = "default"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
REQUIRED = ("name", "bootstrap.servers", "zookeeper.connect")
OPTIONAL = (
    "client.config",
    "zookeeper.jaas.config",
    "metrics.base.port",
    "metrics.ports",
    "schema.registry.url",  # Confluent clients' names for the registry and its basic auth
    "schema.registry.basic.auth.user.info",
)


class ClusterConfigError(ValueError):
    """QUILL_CLUSTERS cannot be used; the message says which entry and why."""


class UnknownCluster(NotFound):
    def __init__(self, name: str):
        super().__init__(f"No cluster named {name!r} in this console.")


@dataclass(frozen=True)
class Cluster:
    name: str
    bootstrap: str
    zookeeper_connect: str
    zookeeper_credentials: ZkCredentials | None = None
    # The client properties (TLS, SASL) of its Kafka clients: librdkafka's dict, and the
    # properties the protocol socket takes (None: the process environment's).
    client_security: dict = field(default_factory=dict, repr=False)  # holds passwords
    client_properties: Mapping[str, str] | None = field(default=None, repr=False)
    metrics_base_port: int = 0
    metrics_ports: dict[int, int] = field(default_factory=dict)
    # Its schema registry ("": none of its own) and basic auth (user, password) or None.
    schema_registry_url: str = ""
    schema_registry_auth: tuple[str, str] | None = field(default=None, repr=False)


def parse(raw: str) -> dict[str, Cluster]:
    """QUILL_CLUSTERS as {name: Cluster}, in the order given; ClusterConfigError if bad."""
    raw = raw.strip()
    if not raw.startswith(("[", "{")):
        try:
            raw = Path(raw).read_text()
        except OSError as exc:
            raise ClusterConfigError(f"QUILL_CLUSTERS: cannot read {raw!r}: {exc}") from None
    try:
        entries = json.loads(raw)
    except ValueError as exc:
        raise ClusterConfigError(f"QUILL_CLUSTERS is not valid JSON: {exc}") from None
    if not isinstance(entries, list) or not entries:
        raise ClusterConfigError("QUILL_CLUSTERS must be a non-empty JSON list of clusters.")
    out: dict[str, Cluster] = {}
    for i, entry in enumerate(entries):
        cluster = _entry(i, entry)
        if cluster.name in out:
            raise ClusterConfigError(f"QUILL_CLUSTERS: the name {cluster.name!r} is used twice.")
        out[cluster.name] = cluster
    return out


def _entry(i: int, entry) -> Cluster:
    where = f"QUILL_CLUSTERS[{i}]"
    if not isinstance(entry, dict):
        raise ClusterConfigError(f"{where} must be a JSON object.")
    where = f"{where} ({entry.get('name', 'unnamed')!r})"
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ClusterConfigError(f"{where}: unknown keys {unknown}; known: {REQUIRED + OPTIONAL}.")
    for key in REQUIRED:
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise ClusterConfigError(f"{where}: {key} is missing (a non-empty string).")
    name = entry["name"].strip()
    if not NAME_RE.fullmatch(name):
        raise ClusterConfigError(
            f"{where}: the name must be lowercase letters, digits, - or _ (40 at most)."
        )
    security, properties, credentials = {}, {}, None  # none: plaintext, anonymous
    try:
        if entry.get("client.config"):
            path = str(entry["client.config"])
            if not Path(path).is_file():
                raise ValueError(f"client.config {path}: no such file")
            security = librdkafka_config({CONFIG_FILE_ENV: path})
            properties = read_properties_file(path)
        if entry.get("zookeeper.jaas.config"):
            jaas = {JAAS_CONFIG_ENV: str(entry["zookeeper.jaas.config"])}
            credentials = credentials_from_env(jaas)
    except (ValueError, OSError) as exc:
        raise ClusterConfigError(f"{where}: {exc}") from None
    try:
        ports = {int(b): int(p) for b, p in (entry.get("metrics.ports") or {}).items()}
        base = int(entry.get("metrics.base.port", 0))
    except (ValueError, TypeError, AttributeError):
        raise ClusterConfigError(
            f'{where}: metrics.ports maps broker ids to ports ({{"1": 9404}}) and '
            "metrics.base.port is a port number."
        ) from None
    registry_url, registry_auth = _schema_registry(where, entry)
    return Cluster(
        name=name,
        bootstrap=entry["bootstrap.servers"].strip(),
        zookeeper_connect=entry["zookeeper.connect"].strip(),
        zookeeper_credentials=credentials,
        client_security=security,
        client_properties=properties,
        metrics_base_port=base,
        metrics_ports=ports,
        schema_registry_url=registry_url,
        schema_registry_auth=registry_auth,
    )


def _schema_registry(where: str, entry: dict) -> tuple[str, tuple[str, str] | None]:
    """schema.registry.url (http or https) and basic.auth.user.info ("user:password")."""
    url = entry.get("schema.registry.url", "")
    info = entry.get("schema.registry.basic.auth.user.info", "")
    if not isinstance(url, str) or (url and not url.startswith(("http://", "https://"))):
        raise ClusterConfigError(f"{where}: schema.registry.url is an http:// or https:// URL.")
    if not isinstance(info, str) or (info and ":" not in info):
        raise ClusterConfigError(
            f'{where}: schema.registry.basic.auth.user.info is "user:password".'
        )
    if info and not url:
        raise ClusterConfigError(
            f"{where}: schema.registry.basic.auth.user.info needs schema.registry.url."
        )
    user, _, password = info.partition(":")
    return url.strip().rstrip("/"), (user, password) if info else None


def clusters_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Cluster]:
    """The settings' QUILL_CLUSTERS ({} when unset); a bad one stops the start."""
    from django.core.exceptions import ImproperlyConfigured

    raw = (os.environ if environ is None else environ).get("QUILL_CLUSTERS", "").strip()
    try:
        return parse(raw) if raw else {}
    except ClusterConfigError as exc:
        raise ImproperlyConfigured(str(exc)) from None


# ---------------------------------------------------------------- the registry
def registry() -> dict[str, Cluster]:
    from django.conf import settings

    configured = getattr(settings, "QUILL_CLUSTERS", None)
    if configured:
        return configured
    return {
        DEFAULT: Cluster(
            name=DEFAULT,
            bootstrap=settings.QUILL_BOOTSTRAP_SERVERS,
            zookeeper_connect=settings.QUILL_ZOOKEEPER_CONNECT,
            zookeeper_credentials=settings.QUILL_ZOOKEEPER_CREDENTIALS,
            client_security=settings.QUILL_CLIENT_SECURITY,
            metrics_base_port=settings.QUILL_METRICS_BASE_PORT,
            metrics_ports=settings.QUILL_METRICS_PORTS,
        )
    }


def names() -> list[str]:
    return list(registry())


def default_name() -> str:
    return next(iter(registry()))


def get(name: str) -> Cluster:
    try:
        return registry()[name]
    except KeyError:
        raise UnknownCluster(name) from None


_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("quill_cluster", default=None)


def current() -> Cluster:
    """The cluster this request or job works on (the default one when none is set)."""
    name = _current.get()
    return get(name) if name is not None else next(iter(registry().values()))


def current_name() -> str:
    return current().name


@contextmanager
def activate(name: str) -> Iterator[Cluster]:
    """Work on cluster `name` inside the block (UnknownCluster if there is none)."""
    cluster = get(name)
    token = _current.set(cluster.name)
    try:
        yield cluster
    finally:
        _current.reset(token)


def in_context(fn: Callable) -> Callable:
    """`fn` bound to the caller's context (its current cluster), for another thread."""
    ctx = contextvars.copy_context()

    def run(*args, **kwargs):
        return ctx.copy().run(fn, *args, **kwargs)  # a context runs in one thread at once

    return run
