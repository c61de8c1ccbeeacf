"""Short history in Redis, written by the monitor and read by pages and the API:
cluster events, per-group lag series and status, per-topic rates."""

from __future__ import annotations

import json
import time

import redis
from django.conf import settings

from cluster_client import clusters, redact
from livefeed.keys import HEARTBEAT, cluster_key

EVENTS = "quill:events"
EVENTS_KEEP = 5000
LAG_KEEP = 3600  # one hour of 1 s samples
TOPIC_RATES = "quill:topic-rates"

# Every kind of event the monitor records (the events page filters by these).
EVENT_KINDS = (
    "leader_change",
    "isr_shrink",
    "isr_expand",
    "partition_offline",
    "broker_up",
    "broker_down",
    "controller_change",
    "topic_created",
    "topic_deleted",
    "partitions_added",
    "config_change",
)


def key(base: str) -> str:
    """The Redis key of `base` for the current cluster (livefeed.keys.cluster_key)."""
    return cluster_key(clusters.current_name(), base)


_client: redis.Redis | None = None
_client_url: str | None = None


def client() -> redis.Redis:
    global _client, _client_url
    if _client is None or _client_url != settings.QUILL_REDIS_URL:
        _client = redis.Redis.from_url(
            settings.QUILL_REDIS_URL, socket_timeout=3, socket_connect_timeout=3
        )
        _client_url = settings.QUILL_REDIS_URL
    return _client


def _safe(default):
    def wrap(fn):
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except redis.RedisError:
                return default

        return inner

    return wrap


def add_event(event: dict) -> None:
    pipe = client().pipeline()
    pipe.lpush(key(EVENTS), json.dumps(event))
    pipe.ltrim(key(EVENTS), 0, EVENTS_KEEP - 1)
    pipe.execute()


@_safe([])
def events(limit: int = 200, topic: str = "", kinds: tuple = ()) -> list[dict]:
    """Newest first; `topic` keeps that topic's events, `kinds` those kinds."""
    raw = client().lrange(key(EVENTS), 0, EVENTS_KEEP - 1 if (topic or kinds) else limit - 1)
    out = []
    for item in raw:
        event = json.loads(item)
        event["text"] = redact.text(event.get("text", ""))
        if topic and event.get("topic") != topic:
            continue
        if kinds and event.get("kind") not in kinds:
            continue
        out.append(event)
        if len(out) >= limit:
            break
    return out


def group_key(group_id: str) -> str:
    return key(f"quill:group:{group_id}")


def lag_key(group_id: str) -> str:
    return key(f"quill:lag:{group_id}")


@_safe(None)
def group_status(group_id: str) -> dict | None:
    raw = client().get(group_key(group_id))
    return json.loads(raw) if raw else None


@_safe([])
def lag_series(group_id: str, seconds: int = 3600) -> list[list]:
    """[[ts, lag, lag_ms], ...] oldest first, over the last `seconds`."""
    since = time.time() - seconds
    rows = [json.loads(x) for x in client().lrange(lag_key(group_id), 0, LAG_KEEP - 1)]
    return [r for r in reversed(rows) if r[0] >= since]


def broker_metrics_key(broker_id: int) -> str:
    return key(f"quill:broker-metrics:{broker_id}")


def broker_series_key(broker_id: int | str, name: str) -> str:
    return key(f"quill:broker-series:{broker_id}:{name}")


@_safe({})
def broker_metrics(broker_id: int) -> dict:
    """The monitor's last reading of a broker's /metrics (see console/monitor/brokers.py)."""
    raw = client().get(broker_metrics_key(broker_id))
    return json.loads(raw) if raw else {}


def _json_by_suffix(prefix: str) -> dict[str, dict]:
    """{key without prefix: JSON value} of every key starting with ``prefix``."""
    r = client()
    keys = sorted(r.scan_iter(match=prefix + "*", count=500))
    values = r.mget(keys) if keys else []
    return {
        k.decode()[len(prefix) :]: json.loads(v) for k, v in zip(keys, values, strict=True) if v
    }


@_safe({})
def all_broker_metrics() -> dict[int, dict]:
    """{broker id: its last reading} of every broker the monitor read in the last minute."""
    return {int(b): v for b, v in _json_by_suffix(broker_metrics_key("")).items()}


@_safe([])
def broker_series(broker_id: int | str, name: str, seconds: int = 3600) -> list[list]:
    """[[ts, value], ...] oldest first; broker_id "all" holds the cluster's sums."""
    since = time.time() - seconds
    rows = [json.loads(x) for x in client().lrange(broker_series_key(broker_id, name), 0, -1)]
    return [r for r in reversed(rows) if r[0] >= since]


@_safe({})
def group_statuses() -> dict[str, dict]:
    """Every group's last status the monitor wrote (they expire after a minute)."""
    return _json_by_suffix(group_key(""))


@_safe({})
def topic_rates() -> dict[str, dict]:
    return {k.decode(): json.loads(v) for k, v in client().hgetall(key(TOPIC_RATES)).items()}


@_safe(None)
def monitor_age() -> float | None:
    """Seconds since the monitor last sampled, or None when it never has."""
    raw = client().get(key(HEARTBEAT))
    return None if raw is None else max(0.0, time.time() - float(raw))
