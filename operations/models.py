"""The job record every operation keeps in the console's database. Workers write it
(state, progress, steps, checkpoint, result); the console reads it and sets the cancel
and pause flags. `lease_owner`/`lease_until` say which worker runs it now."""

from __future__ import annotations

from django.conf import settings
from django.db import models

PENDING, RUNNING, PAUSED = "pending", "running", "paused"
SUCCEEDED, FAILED, CANCELLED = "succeeded", "failed", "cancelled"
STATES = (PENDING, RUNNING, PAUSED, SUCCEEDED, FAILED, CANCELLED)
ACTIVE = (PENDING, RUNNING, PAUSED)
KINDS = ("reassign", "rebalance", "elect-leaders", "compact", "rolling-restart", "decommission")
STEPS_KEPT = 500


class Operation(models.Model):
    # the cluster it belongs to (cluster_client.clusters; "default" for a single cluster)
    cluster = models.CharField(max_length=40, default="default", db_index=True)
    kind = models.CharField(max_length=32, db_index=True)
    params = models.JSONField(default=dict)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    username = models.CharField(max_length=150)
    source = models.CharField(max_length=8, default="ui")  # ui | api
    state = models.CharField(max_length=16, default=PENDING, db_index=True)
    progress = models.JSONField(default=dict)  # {"done", "total", "percent", ...}
    steps = models.JSONField(default=list)  # [{"at": iso, "message": ...}]
    checkpoint = models.JSONField(default=dict)  # what a resumed run continues from
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    pause_requested = models.BooleanField(default=False)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "console_operation"  # the table it had in the console app: rows kept
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"operation {self.id} {self.kind} {self.state}"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def as_dict(self, full: bool = True) -> dict:
        out = {
            "id": self.id,
            "kind": self.kind,
            "user": self.username,
            "state": self.state,
            "progress": self.progress,
            "created": self.created.isoformat() if self.created else None,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
            "cancel_requested": self.cancel_requested,
            "pause_requested": self.pause_requested,
            "error": self.error,
        }
        if full:
            out.update(params=self.params, steps=self.steps, result=self.result)
        return out
