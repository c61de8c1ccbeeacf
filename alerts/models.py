"""Alert rules and the history of what they fired."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.db import models


def webhook_target(url: str) -> str:
    """What may be shown of a webhook to whoever cannot change it: scheme and host,
    never the path, query or user info (chat webhooks carry their secret there)."""
    if not url:
        return ""
    parts = urlsplit(url)
    tail = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{tail}"


STATUSES = ("WARN", "ERR", "STOP", "STALL", "REWIND")
FIRING, RESOLVED = "firing", "resolved"
TEST = "test"  # sent by an operator's "test fire"; not part of any episode


class AlertRule(models.Model):
    # the cluster it belongs to (cluster_client.clusters; "default" for a single cluster)
    cluster = models.CharField(max_length=40, default="default", db_index=True)
    name = models.CharField(max_length=100)
    group = models.CharField(max_length=255)  # a group id, or a glob such as orders-*
    statuses = models.JSONField(default=list)  # group or partition statuses that fire
    max_lag_ms = models.BigIntegerField(null=True, blank=True)  # lag in time over this fires
    webhook_url = models.URLField(max_length=500, blank=True)
    emails = models.JSONField(default=list)
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "console_alertrule"  # the table it had in the console app: rows kept
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"alert rule {self.name} on {self.group}"

    def as_dict(self, secrets: bool = True) -> dict:
        """``secrets``: the whole webhook URL (for those who may change the rule);
        otherwise only where it goes (webhook_target)."""
        return {
            "id": self.id,
            "name": self.name,
            "group": self.group,
            "statuses": self.statuses,
            "max_lag_ms": self.max_lag_ms,
            "webhook_url": self.webhook_url if secrets else webhook_target(self.webhook_url),
            "emails": self.emails,
            "enabled": self.enabled,
        }


class AlertEvent(models.Model):
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="events")
    group_id = models.CharField(max_length=255, db_index=True)
    kind = models.CharField(max_length=10)  # firing | resolved | test
    status = models.CharField(max_length=10)
    lag = models.BigIntegerField(default=0)
    lag_ms = models.BigIntegerField(null=True, blank=True)
    partitions = models.JSONField(default=list)
    reason = models.TextField(blank=True)
    # {"webhook": "HTTP 200" | "failed: ...", "email": ...}; the detail is for admins
    delivered = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        db_table = "console_alertevent"  # the table it had in the console app: rows kept
        ordering = ["-at", "-id"]

    @property
    def summary(self) -> dict:
        """What every role may see of the deliveries: delivered or failed. The detail
        (HTTP status, error) can map the network behind the worker: admins only."""
        return {
            k: "delivered" if str(v).startswith("HTTP 2") or v == "sent" else "failed"
            for k, v in (self.delivered or {}).items()
        }

    def as_dict(self, detail: bool = False) -> dict:
        return {
            "id": self.id,
            "rule": self.rule_id,
            "group": self.group_id,
            "kind": self.kind,
            "status": self.status,
            "lag": self.lag,
            "lag_ms": self.lag_ms,
            "partitions": self.partitions,
            "reason": self.reason,
            "delivered": self.delivered if detail else self.summary,
            "at": self.at.isoformat(),
        }
