"""The console's own tables: the audit log and API tokens.

Roles are Django groups (viewer, operator, admin; see console.roles); their
permissions are declared on AuditEntry's Meta so they belong to this app.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One change made through the console, from the UI or the API."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    username = models.CharField(max_length=150)  # kept when the user is deleted
    source = models.CharField(max_length=8)  # ui | api | cli
    action = models.CharField(max_length=64, db_index=True)  # topic.create, quota.set, ...
    target = models.CharField(max_length=512, db_index=True)  # topic:orders, group:g1, ...
    # the cluster it was done on (cluster_client.clusters; "default" for a single cluster)
    cluster = models.CharField(max_length=40, default="default", db_index=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    ok = models.BooleanField(default=True)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        permissions = [
            ("view_cluster", "See the cluster, topics, groups, quotas and messages"),
            ("operate_cluster", "Change topics, configs, groups, quotas; produce"),
            ("administer_cluster", "Delete topics and groups, manage users and tokens"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.action} {self.target}"

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "user": self.username,
            "source": self.source,
            "action": self.action,
            "target": self.target,
            "cluster": self.cluster,
            "before": self.before,
            "after": self.after,
            "ok": self.ok,
            "detail": self.detail,
        }


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    """A bearer token for scripts: `Authorization: Bearer qk_...`. Only its hash is kept."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)  # shown in lists, to tell tokens apart
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name}, {self.user})"

    @classmethod
    def issue(cls, user, name: str) -> tuple[ApiToken, str]:
        """A new token for `user`; the raw key is returned once and never stored."""
        raw = "qk_" + secrets.token_urlsafe(30)
        token = cls.objects.create(user=user, name=name, prefix=raw[:10], key_hash=hash_token(raw))
        return token, raw

    @classmethod
    def lookup(cls, raw: str) -> ApiToken | None:
        return cls.objects.select_related("user").filter(key_hash=hash_token(raw)).first()


class TopicSchema(models.Model):
    """A schema uploaded to the console for a topic's keys or values (issue 29): raw
    (not wire-format) payloads of that topic are shown decoded with it."""

    KINDS = [("avro", "Avro (JSON schema)"), ("protobuf", "Protobuf (.proto text)")]
    PARTS = [("key", "key"), ("value", "value")]

    # the cluster whose topic it is (cluster_client.clusters; "default" for a single cluster)
    cluster = models.CharField(max_length=40, default="default")
    topic = models.CharField(max_length=249, db_index=True)
    part = models.CharField(max_length=5, choices=PARTS)
    kind = models.CharField(max_length=8, choices=KINDS)
    schema = models.TextField()
    message = models.CharField(max_length=512, blank=True)  # Protobuf: the message's full name
    updated = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150)

    class Meta:
        ordering = ["topic", "part"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "topic", "part"], name="one_schema_per_cluster_topic_part"
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.part}: {self.kind}"

    def as_dict(self, with_schema: bool = True) -> dict:
        out = {
            "topic": self.topic,
            "part": self.part,
            "kind": self.kind,
            "message": self.message,
            "updated": self.updated.isoformat() if self.updated else None,
            "updated_by": self.updated_by,
            "chars": len(self.schema),
        }
        if with_schema:
            out["schema"] = self.schema
        return out


class SSOIdentity(models.Model):
    """Who a single sign-on account belongs to (console.sso.accounts): the source that
    made it and, for OpenID Connect, the provider's (issuer, subject). A login from
    another source, or another subject with the same user name, is refused."""

    SOURCES = [("ldap", "LDAP"), ("oidc", "OpenID Connect")]

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    source = models.CharField(max_length=4, choices=SOURCES)
    # LDAP: the entry's DN at the last login; OIDC: the id token's iss and sub
    subject = models.TextField()

    def __str__(self) -> str:
        return f"{self.user_id}: {self.source} {self.subject}"
