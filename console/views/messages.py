"""Messages: read a partition from an offset, a timestamp or the end; produce one."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from cluster_client import zk
from cluster_client.errors import OpError
from console.ops import messages as message_ops
from console.roles import VIEWER, role_required
from console.views.common import attempt, page
from livefeed import groups as live_groups


@role_required(VIEWER)
def browse(request: HttpRequest, produced=None, errors=None, status=200) -> HttpResponse:
    q = request.GET
    topic = q.get("topic", "")
    result, read_errors = None, {}
    if topic:
        try:
            result = message_ops.read(
                topic,
                q.get("partition", "0"),
                q.get("mode", "end"),
                q.get("value", ""),
                q.get("limit", "50"),
                q.get("format", "text"),
            )
        except OpError as exc:
            flash.error(request, exc.message)
            read_errors, status = exc.errors, exc.status
    try:
        topics = [t for t in zk.topic_names()]
    except OpError:
        topics = []
    context = {
        "topics": topics,
        "q": q,
        "result": result,
        "formats": message_ops.FORMATS,
        "errors": {**read_errors, **(errors or {})},
        "produced": produced,
        "form": request.POST if request.method == "POST" else {},
    }
    subs = [live_groups.topic_sub(topic)] if topic else []
    return page(request, "console/messages.html", context, subs, status=status)


@require_POST
@role_required(VIEWER)
def produce(request: HttpRequest) -> HttpResponse:
    p = request.POST
    headers = [line for line in p.get("headers", "").splitlines() if line.strip()]
    result, err = attempt(
        request,
        message_ops.produce,
        p.get("topic", ""),
        p.get("partition"),
        p.get("key") or None,
        p.get("value", ""),
        headers,
    )
    if err:
        return browse(request, errors=err.errors, status=err.status)
    flash.success(
        request,
        f"Produced to {result['topic']}-{result['partition']} at offset {result['offset']}.",
    )
    return browse(request, produced=result)
