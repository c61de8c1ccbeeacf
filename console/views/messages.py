"""Messages: read a partition from an offset, a timestamp or the end; produce one;
search every partition of a topic (console.views.message_search) and download what
was found."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from cluster_client import zk
from cluster_client.errors import OpError
from console.changes import messages as message_ops
from console.changes import schemas as schema_ops
from console.roles import VIEWER, role_required
from console.schemas import registry
from console.schemas.decoder import PARTS
from console.views import message_search
from console.views.common import attempt, page
from livefeed import groups as live_groups


def _topics() -> list[str]:
    """The topic names for the pickers (none when ZooKeeper does not answer)."""
    try:
        return list(zk.topic_names())
    except OpError:
        return []


@role_required(VIEWER)
def browse(
    request: HttpRequest, produced=None, errors=None, status=200, schema_errors=None
) -> HttpResponse:
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
    context = {
        "topics": _topics(),
        "q": q,
        "result": result,
        "formats": message_ops.FORMATS,
        "errors": {**read_errors, **(errors or {})},
        "produced": produced,
        "form": request.POST if request.method == "POST" else {},
        "schemas": schema_ops.listing(topic) if topic else [],
        "schema_parts": PARTS,
        "schema_errors": schema_errors or {},
        "registry": (registry.registry_settings() or {}).get("url"),
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


@require_POST
@role_required(VIEWER)
def schema_upload(request: HttpRequest) -> HttpResponse:
    """Upload (or replace) the topic's key or value schema (operators)."""
    p = request.POST
    topic = p.get("topic", "")
    _, err = attempt(
        request,
        schema_ops.upload,
        topic,
        p.get("part", ""),
        p.get("kind", ""),
        p.get("schema", ""),
        p.get("message", ""),
        success=f"The {p.get('part', '')} schema of {topic} is saved.",
    )
    if err:  # the form comes back with the operator's text and the reason beside it
        return browse(request, schema_errors=err.errors, status=err.status)
    return _back_to_topic(request, topic)


@require_POST
@role_required(VIEWER)
def schema_delete(request: HttpRequest) -> HttpResponse:
    p = request.POST
    topic = p.get("topic", "")
    attempt(
        request,
        schema_ops.delete,
        topic,
        p.get("part", ""),
        success=f"The {p.get('part', '')} schema of {topic} is deleted.",
    )
    return _back_to_topic(request, topic)


def _back_to_topic(request: HttpRequest, topic: str) -> HttpResponse:
    query = request.GET.copy()
    query["topic"] = topic
    return redirect(f"{reverse('messages')}?{query.urlencode()}")


@role_required(VIEWER)
def search(request: HttpRequest) -> HttpResponse:
    """Search every partition of a topic. The browser pages the search in bounded steps
    through /api/messages/search (progress, stop, continue); without scripts, the form's
    GET runs one bounded search here."""
    q = request.GET
    result, errors, status = None, {}, 200
    if q.get("topic"):
        try:
            result = message_search.search(message_search.parse(q))
        except OpError as exc:
            flash.error(request, exc.message)
            errors, status = exc.errors, exc.status
    context = {
        "topics": _topics(),
        "q": q,
        "result": result,
        "errors": errors,
        "starts": message_search.STARTS,
        "formats": message_search.FORMATS,
        "regex_on": message_search.REGEX_ON,
        "bounds": {
            "scanned": (message_search.MAX_SCANNED_DEFAULT, message_search.MAX_SCANNED_CAP),
            "ms": (message_search.MAX_MS_DEFAULT, message_search.MAX_MS_CAP),
            "results": (message_search.MAX_RESULTS_DEFAULT, message_search.MAX_RESULTS_CAP),
        },
    }
    return page(request, "console/message_search.html", context, status=status)


@role_required(VIEWER)
def search_download(request: HttpRequest) -> HttpResponse:
    try:
        body, content_type, summary = message_search.download(request.GET)
    except OpError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return download_response(body, content_type, summary)


def download_response(body: bytes, content_type: str, summary: dict) -> HttpResponse:
    """The found records as an attachment, the search's summary in X-Quill-* headers."""
    ext = "csv" if content_type.startswith("text/csv") else "jsonl"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{summary["topic"]}-search.{ext}"'
    for name, value in message_search.summary_headers(summary).items():
        response[name] = value
    return response
