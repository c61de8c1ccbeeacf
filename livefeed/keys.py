"""Redis key names of the monitor's history, without Django: the health probe of
`quill_stack.health monitor` reads them too, once every few seconds for the stack's life."""

from __future__ import annotations

DEFAULT_CLUSTER = "default"  # cluster_client.clusters.DEFAULT
HEARTBEAT = "quill:monitor:heartbeat"


def cluster_key(cluster: str, base: str) -> str:
    """The Redis key of `base` for `cluster`: `base` itself for the cluster "default" (the
    keys a single-cluster console always used), quill:c:<name>:... for any other."""
    if cluster == DEFAULT_CLUSTER:
        return base
    return f"quill:c:{cluster}:{base.removeprefix('quill:')}"
