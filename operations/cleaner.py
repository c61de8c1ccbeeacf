"""The cleaner's standing status of a compacted topic, for its page: the figures each
broker last reported under /admin/compact/<topic>/results (a compaction, or a
standing-status request: the "Refresh cleaner status" button, kind compact with
clean false)."""

from __future__ import annotations

from cluster_client.errors import OpError


def compaction_reports(topic: str, configs: list[dict]) -> dict | None:
    """None for a topic that is not compacted; else {"rows": [...]} (maybe empty)."""
    policy = next((c["value"] for c in configs if c["name"] == "cleanup.policy"), "") or ""
    if "compact" not in policy:
        return None
    from operations.kinds.compact import standing

    try:
        return {"rows": standing(topic)}
    except OpError as exc:
        return {"rows": [], "error": exc.message}
