"""The audit log: every change, from the UI or the API, with who, when, what, before
and after. Operations in console.ops call `record` once per attempt."""

from __future__ import annotations

from console.models import AuditEntry

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
