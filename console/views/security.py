"""Cluster security pages (admin role): the brokers' SCRAM users (mechanisms and
iterations; add, change a password, delete a credential) and ACLs (list with filters,
add, remove). Both go through the Kafka protocol; every change is audited."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from cluster_client import security as cluster
from cluster_client.errors import OpError
from console.changes import security as security_ops
from console.roles import ADMIN, role_required
from console.views.common import actor, attempt, page, unavailable

ACL_FIELDS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission",
)


def _page(request, template: str, context: dict, key: str, read, errors, status: int):
    """The page with ``context[key] = read()`` (and the form and its errors), or the
    shell with the reason the cluster could not be read."""
    context = {
        "form": request.POST if request.method == "POST" else {},
        **context,
        "errors": errors or {},
    }
    try:
        context[key] = read()
    except OpError as exc:
        return unavailable(request, template, exc, context)
    return page(request, template, context, status=status)


@role_required(ADMIN)
def scram_users(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    context = {
        "mechanisms": cluster.MECHANISMS,
        "min_iterations": security_ops.MIN_ITERATIONS,
        "max_iterations": security_ops.MAX_ITERATIONS,
    }
    if request.method == "GET":  # a row's "change password": the form names its user
        context["form"] = {k: request.GET.get(k, "") for k in ("user", "mechanism")}
    read = lambda: security_ops.scram_users(actor(request))  # noqa: E731
    return _page(request, "console/scram_users.html", context, "scram_users", read, errors, status)


@require_POST
@role_required(ADMIN)
def scram_user_action(request: HttpRequest) -> HttpResponse:
    p = request.POST
    user, mechanism = p.get("user", ""), p.get("mechanism", "")
    if p.get("action") == "delete":
        _, err = attempt(
            request,
            security_ops.delete_credential,
            user,
            mechanism,
            success=f"Deleted the {mechanism} credential of {user}.",
        )
    else:
        _, err = attempt(
            request,
            security_ops.set_password,
            user,
            mechanism,
            p.get("password", ""),
            p.get("iterations") or security_ops.DEFAULT_ITERATIONS,
            success=f"Saved the {mechanism} password of {user}; brokers are notified.",
        )
    if err:
        return scram_users(request, err.errors, err.status)
    return redirect("scram-users")


@role_required(ADMIN)
def acls(request: HttpRequest, errors=None, status=200) -> HttpResponse:
    wanted = {k: request.GET.get(k, "") for k in ACL_FIELDS}
    context = {
        "filter": wanted,
        "resource_types": list(cluster.RESOURCE_TYPES),
        "pattern_types": cluster.PATTERN_TYPES,
        "operations": cluster.OPERATIONS,
        "permissions": cluster.PERMISSIONS,
    }
    try:  # said up front, with no form that would fail only once submitted
        context["no_authorizer"] = not cluster.authorizer_configured()
    except OpError:
        pass  # the read below says why the cluster could not be asked
    read = lambda: security_ops.acls(actor(request), wanted)  # noqa: E731

    return _page(request, "console/acls.html", context, "acls", read, errors, status)


@require_POST
@role_required(ADMIN)
def acl_action(request: HttpRequest) -> HttpResponse:
    raw = {k: request.POST.get(k, "") for k in ACL_FIELDS}
    if request.POST.get("action") == "remove":
        _, err = attempt(request, security_ops.remove_acl, raw, success="Removed the ACL.")
    else:
        _, err = attempt(request, security_ops.add_acl, raw, success="Added the ACL.")
    if err:
        return acls(request, err.errors, err.status)
    return redirect(
        reverse("acls") + ("?" + request.POST["next"] if request.POST.get("next") else "")
    )
