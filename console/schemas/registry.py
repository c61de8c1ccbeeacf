"""Schemas by id from a Confluent-compatible schema registry (GET /schemas/ids/{id}),
compiled once and cached per (cluster, registry, id) with a bound (each cluster of
the console has its own registry: two clusters' id 1 are different schemas), fetched with timeouts. A registry that is
down or answers garbage gives a SchemaError with a sentence ("schema 7: registry
unreachable"), remembered for a few seconds so one page does not wait on it per record."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict

import requests
from django.conf import settings

from cluster_client import clusters
from console.schemas import codec
from console.schemas.codec import Compiled, SchemaError

CACHE_SIZE = 256  # compiled schemas kept (ids never change their schema)
FAILURE_TTL_S = 15.0  # how long a failed lookup (or an unreachable registry) is remembered
CONNECT_TIMEOUT_S = 2.0
TYPES = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}

_lock = threading.Lock()
_cache: OrderedDict = OrderedDict()  # (cluster, url, id) -> Compiled | SchemaError, expiry
_down_until: dict[tuple[str, str], tuple[float, str]] = {}  # (cluster, url) -> (until, why)


def registry_settings() -> dict | None:
    """The current cluster's registry (None: it has none): its schema.registry.url in
    QUILL_CLUSTERS, else, for the default cluster, QUILL_SCHEMA_REGISTRY_*."""
    cluster = clusters.current()
    url, auth = cluster.schema_registry_url, cluster.schema_registry_auth
    if not url and cluster.name == clusters.default_name():
        url = (getattr(settings, "QUILL_SCHEMA_REGISTRY_URL", "") or "").rstrip("/")
        user = getattr(settings, "QUILL_SCHEMA_REGISTRY_USER", "") or ""
        password = getattr(settings, "QUILL_SCHEMA_REGISTRY_PASSWORD", "") or ""
        auth = (user, password) if user else None
    if not url:
        return None
    return {
        "cluster": cluster.name,
        "url": url,
        "auth": auth,
        "timeout_s": float(getattr(settings, "QUILL_SCHEMA_REGISTRY_TIMEOUT_S", 3.0)),
    }


def reset() -> None:
    with _lock:
        _cache.clear()
        _down_until.clear()


def _fetch(conf: dict, schema_id: int) -> Compiled:
    url = f"{conf['url']}/schemas/ids/{schema_id}"
    try:
        resp = requests.get(
            url,
            auth=conf["auth"],
            timeout=(CONNECT_TIMEOUT_S, conf["timeout_s"]),
            stream=True,
            headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"},
        )
        body = resp.raw.read(codec.MAX_SCHEMA_CHARS * 2 + 1, decode_content=True)
        resp.close()
    except (requests.ConnectionError, requests.Timeout):
        raise ConnectionError("registry unreachable") from None
    except (requests.RequestException, OSError) as exc:
        raise ConnectionError(f"registry unreachable ({type(exc).__name__})") from None
    if resp.status_code == 404:
        raise SchemaError("not in the registry (404)")
    if resp.status_code in (401, 403):
        raise SchemaError(f"the registry refused the console's credentials ({resp.status_code})")
    if resp.status_code != 200:
        raise SchemaError(f"the registry answered HTTP {resp.status_code}")
    if len(body) > codec.MAX_SCHEMA_CHARS * 2:
        raise SchemaError(f"the registry's answer is larger than {codec.MAX_SCHEMA_CHARS:,} bytes")
    try:
        doc = json.loads(body)
        text = doc["schema"]
        kind = TYPES[doc.get("schemaType") or "AVRO"]
        if not isinstance(text, str):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise SchemaError("the registry answered something that is not a schema") from None
    if kind == "json":
        return Compiled("json")
    return codec.compile_schema(kind, text)


def schema(schema_id: int) -> Compiled:
    """The compiled schema with this id; SchemaError ("schema 7: ...") when it cannot be had."""
    conf = registry_settings()
    if conf is None:
        raise SchemaError(f"schema {schema_id}: no schema registry is configured")
    where = (conf["cluster"], conf["url"])
    key, now = (*where, schema_id), time.monotonic()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[1] > now:
            _cache.move_to_end(key)
            if isinstance(hit[0], SchemaError):
                raise hit[0]
            return hit[0]
        down = _down_until.get(where)
        if down and down[0] > now:
            raise SchemaError(f"schema {schema_id}: {down[1]}")
    try:
        result: Compiled | SchemaError = _fetch(conf, schema_id)
        expiry = float("inf")
    except ConnectionError as exc:
        with _lock:
            _down_until[where] = (time.monotonic() + FAILURE_TTL_S, str(exc))
        raise SchemaError(f"schema {schema_id}: {exc}") from None
    except SchemaError as exc:
        result, expiry = SchemaError(f"schema {schema_id}: {exc}"), now + FAILURE_TTL_S
    with _lock:
        _cache[key] = (result, expiry)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    if isinstance(result, SchemaError):
        raise result
    return result
