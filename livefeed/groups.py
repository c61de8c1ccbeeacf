"""Channel groups browsers subscribe to, and the delta messages sent to them.

A page subscribes with names like `cluster`, `topics`, `groups`, `topic:<name>`,
`group:<id>`, `operations`, `operation:<id>`; each maps to one channel-layer group
(hashed, since channel group names allow only short ASCII). A delta is {"set": {key: cell}, "events": [...],
"refresh": bool, "series": {...}}: console.js patches elements by their data-k keys.
"""

from __future__ import annotations

import hashlib

from cluster_client import clusters

STATIC_SUBS = {"cluster", "topics", "groups", "operations"}
MESSAGE_TYPE = "live.delta"


def topic_sub(name: str) -> str:
    return f"topic:{name}"


def group_sub(group_id: str) -> str:
    return f"group:{group_id}"


def broker_sub(broker_id: int) -> str:
    return f"broker:{broker_id}"


def channel_group(sub: str, cluster: str | None = None) -> str | None:
    """The channel-layer group for a subscription name in `cluster` (default: the
    current one), or None when it is not one. The cluster "default" keeps the names a
    single-cluster console used; another's are quill.c.<name>.…, so the pages of one
    cluster never receive another's updates."""
    name = clusters.current_name() if cluster is None else cluster
    ns = "quill." if name == clusters.DEFAULT else f"quill.c.{name}."
    if sub in STATIC_SUBS:
        return f"{ns}{sub}"
    kind, sep, rest = sub.partition(":")
    if sep and kind in ("topic", "group", "broker", "operation") and rest:
        return f"{ns}{kind}.{hashlib.sha1(rest.encode()).hexdigest()[:24]}"
    return None


def message(data: dict) -> dict:
    return {"type": MESSAGE_TYPE, "data": data}
