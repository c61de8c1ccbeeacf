"""Users and roles (admins) and API tokens (everyone, their own)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from console.changes import users as user_ops
from console.models import ApiToken
from console.roles import ADMIN, ROLES, VIEWER, has_role, role_of, role_required
from console.sso.accounts import sso_user_ids
from console.views.common import attempt, page


@role_required(ADMIN)
def user_list(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    sso = sso_user_ids()
    users = [
        {"user": u, "role": role_of(u), "sso": u.pk in sso}
        for u in get_user_model().objects.order_by("username")
    ]
    context = {
        "users": users,
        "roles": ROLES,
        "errors": errors or {},
        "form": request.POST if request.method == "POST" else {},
    }
    return page(request, "console/users.html", context, status=status)


@require_POST
@role_required(ADMIN)
def user_action(request: HttpRequest) -> HttpResponse:
    p = request.POST
    action = p.get("action")
    if action == "create":
        _, err = attempt(
            request,
            user_ops.create_user,
            p.get("username"),
            p.get("password"),
            p.get("role"),
            success=f"Created login {p.get('username')}.",
        )
    elif action == "role":
        _, err = attempt(
            request,
            user_ops.change_role,
            p.get("username"),
            p.get("role"),
            success=f"{p.get('username')} is now {p.get('role')}.",
        )
    else:
        active = action == "activate"
        _, err = attempt(
            request,
            user_ops.set_active,
            p.get("username"),
            active,
            success=f"{p.get('username')} {'activated' if active else 'deactivated'}.",
        )
    if err:
        return user_list(request, err.errors, err.status)
    return redirect("users")


@role_required(VIEWER)
def tokens(request: HttpRequest, raw=None, errors=None, status=200) -> HttpResponse:
    mine = ApiToken.objects.filter(user=request.user)
    everyone = ApiToken.objects.select_related("user") if has_role(request.user, ADMIN) else None
    context = {"tokens": mine, "all_tokens": everyone, "raw": raw, "errors": errors or {}}
    return page(request, "console/tokens.html", context, status=status)


@require_POST
@role_required(VIEWER)
def token_action(request: HttpRequest) -> HttpResponse:
    if request.POST.get("action") == "revoke":
        _, err = attempt(
            request, user_ops.revoke_token, request.POST.get("id"), success="Revoked the token."
        )
        if err:
            return tokens(request, errors=err.errors, status=err.status)
        return redirect("tokens")
    result, err = attempt(request, user_ops.issue_token, request.POST.get("name"))
    if err:
        return tokens(request, errors=err.errors, status=err.status)
    return tokens(request, raw=result[1])
