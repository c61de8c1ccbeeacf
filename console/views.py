from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache


@login_required
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "console/home.html",
        {
            "bootstrap_servers": settings.QUILL_BOOTSTRAP_SERVERS,
            "zookeeper_connect": settings.QUILL_ZOOKEEPER_CONNECT,
        },
    )


@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """For health checks: no login; 200 when the console can reach its database."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any database error means unhealthy
        return JsonResponse({"status": "error", "detail": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})
