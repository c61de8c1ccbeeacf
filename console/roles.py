"""Roles: viewer (read), operator (topics, groups, quotas, produce), admin (users,
deletes, dangerous operations). Each is a Django group holding the permissions of
the roles below it; superusers are admins."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
PERMISSION = {
    VIEWER: "console.view_cluster",
    OPERATOR: "console.operate_cluster",
    ADMIN: "console.administer_cluster",
}
# The permissions each role's group holds (codenames in the console app).
GROUP_PERMISSIONS = {
    VIEWER: ["view_cluster"],
    OPERATOR: ["view_cluster", "operate_cluster"],
    ADMIN: ["view_cluster", "operate_cluster", "administer_cluster"],
}


def has_role(user, role: str) -> bool:
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or user.has_perm(PERMISSION[role])


def role_of(user) -> str | None:
    """The highest role a user holds, or None."""
    for role in reversed(ROLES):
        if has_role(user, role):
            return role
    return None


def set_role(user, role: str | None) -> None:
    from django.contrib.auth.models import Group

    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role:
        user.groups.add(Group.objects.get(name=role))
    for cache in ("_perm_cache", "_user_perm_cache", "_group_perm_cache"):
        user.__dict__.pop(cache, None)


def ensure_groups() -> None:
    """Create the three role groups with their permissions (migrations call this)."""
    from django.contrib.auth.models import Group, Permission

    for role, codenames in GROUP_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        perms = Permission.objects.filter(content_type__app_label="console", codename__in=codenames)
        group.permissions.set(perms)


def role_required(role: str):
    """View decorator: login page for anonymous users, 403 for too small a role."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This needs the {role} role.")
            return view(request, *args, **kwargs)

        wrapper.required_role = role
        return wrapper

    return decorate
