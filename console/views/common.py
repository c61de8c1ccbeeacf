"""What every page view shares: the actor for console.changes, OpError -> form errors and
messages, and the render call that adds the live subscriptions."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from cluster_client.errors import ClusterUnavailable, OpError
from console.changes import Actor


def actor(request: HttpRequest) -> Actor:
    return Actor(request.user, "ui")


def page(
    request: HttpRequest,
    template: str,
    context: dict,
    subs: list[str] | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {**context, "live_subs": ",".join(subs or [])}
    return render(request, template, context, status=status)


def attempt(request: HttpRequest, fn, *args, success: str = "", **kwargs):
    """Run an operation; on OpError flash its sentence and return (None, the error)."""
    try:
        result = fn(actor(request), *args, **kwargs)
    except OpError as exc:
        messages.error(request, exc.message)
        return None, exc
    if success:
        messages.success(request, success)
    return result, None


def unavailable(
    request: HttpRequest, template: str, exc: OpError, context=None, subs=None
) -> HttpResponse:
    """The page shell with the reason the cluster could not be read."""
    status = 503 if isinstance(exc, ClusterUnavailable) else exc.status
    return page(request, template, {**(context or {}), "error": exc.message}, subs, status)


def back(request: HttpRequest, fallback: str) -> HttpResponse:
    return redirect(request.POST.get("next") or fallback)
