"""The audit log: every change, from the UI or the API, with who, when, what, before
and after. Operations in console.changes call `record` once per attempt."""

from __future__ import annotations

from cluster_client import clusters
from console.models import AuditEntry
from console.roles import role_of
from console.sso.refusal import refusal

MAX_PAGE = 5000  # entries one request may list


def record(
    user,
    source: str,
    action: str,
    target: str,
    before=None,
    after=None,
    ok: bool = True,
    detail: str = "",
) -> AuditEntry:
    authenticated = user is not None and user.is_authenticated
    return AuditEntry.objects.create(
        user=user if authenticated else None,
        username=user.get_username() if authenticated else "anonymous",
        source=source,
        action=action,
        target=target,
        cluster=clusters.current_name(),
        before=before,
        after=after,
        ok=ok,
        detail=detail[:2000],
    )


def entries(action: str = "", target: str = "", user: str = "", limit: int = 200):
    qs = AuditEntry.objects.all()
    if action:
        qs = qs.filter(action__startswith=action)
    if target:
        qs = qs.filter(target__icontains=target)
    if user:
        qs = qs.filter(username=user)
    return qs[:limit]


# ---------------------------------------------------------------- security events
# Wired in console.apps (signals) and console.middleware (403s): what an attacker tries
# is on the record next to what operators change.


def client_address(request) -> str:
    return (request.META.get("REMOTE_ADDR") or "?") if request is not None else "?"


def login_failed(sender, credentials=None, request=None, **kwargs) -> None:
    """django.contrib.auth's user_login_failed: the name tried, never the password, and
    why an SSO backend refused it (no mapped group, directory down) when it did."""
    name = str((credentials or {}).get("username") or "")
    if not name:
        return  # the OIDC callback: sso_login_failed records it with its reason
    source = "admin" if request is not None and request.path.startswith("/admin/") else "ui"
    reason = refusal(request) or "wrong user name or password"
    record(
        None,
        source,
        "login.failed",
        f"login:{name[:150]}",
        ok=False,
        detail=f"{reason} (from {client_address(request)})",
    )


def sso_login_failed(request, provider: str, reason: str) -> None:
    """An OpenID Connect sign-in that failed (bad state, token, groups, provider)."""
    record(
        None,
        "ui",
        "login.failed",
        f"login:{provider}"[:512],
        ok=False,
        detail=f"{reason} (from {client_address(request)})",
    )


SSO_BACKENDS = {"LDAPRoleBackend": "LDAP", "OIDCRoleBackend": "OpenID Connect"}


def sso_login(sender, request=None, user=None, **kwargs) -> None:
    """user_logged_in through LDAP or OIDC: who, with which role, from where (local
    logins are not recorded: tests and scripts log in by the thousand)."""
    via = SSO_BACKENDS.get(str(getattr(user, "backend", "")).rsplit(".", 1)[-1])
    if via is None:
        return
    record(
        user,
        "ui",
        "login",
        f"login:{user.get_username()}"[:512],
        detail=f"via {via} as {role_of(user)} (from {client_address(request)})",
    )


def denied(request, user) -> None:
    """A 403: who asked for what (pages, the API, CSRF failures)."""
    source = "api" if request.path.startswith("/api/") else "ui"
    record(
        user,
        source,
        "denied",
        f"{request.method} {request.path}"[:512],
        ok=False,
        detail=f"403 for {client_address(request)}",
    )


def admin_change(sender, instance=None, created=False, **kwargs) -> None:
    """Every change made through /admin/ (users too): Django's own LogEntry names the
    admin, the object and the change."""
    if not created:
        return
    kind = {1: "add", 2: "change", 3: "delete"}.get(instance.action_flag, "change")
    model = instance.content_type.model if instance.content_type_id else "object"
    record(
        instance.user,
        "admin",
        f"admin.{model}.{kind}",
        f"{model}:{instance.object_repr}"[:512],
        detail=instance.get_change_message()[:2000],
    )
