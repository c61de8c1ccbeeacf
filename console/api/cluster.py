"""/api/cluster, /api/brokers, /api/quotas, /api/messages, /api/events, /api/audit,
/api/me."""

from __future__ import annotations

from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from cluster_client import state, zk
from console import audit
from console.api.common import actor, viewer
from console.changes import messages as message_ops
from console.changes import quotas as quota_ops
from console.changes import validation
from console.roles import role_of
from console.views import message_search
from console.views.messages import download_response
from livefeed import history

router = Router(tags=["cluster"])


class QuotaIn(Schema):
    user: str | None = Field(None, description="user principal, or <default>")
    client: str | None = Field(None, description="client id, or <default>")
    quotas: dict[str, str | int | float] = Field(
        ...,
        description="producer_byte_rate, consumer_byte_rate, request_percentage, "
        "controller_mutation_rate; keys left out are removed",
    )


class MessageIn(Schema):
    topic: str
    partition: int | None = None
    key: str | None = None
    value: str = ""
    headers: list[str] = Field(default_factory=list, description="name=value")


class SearchIn(Schema):
    """A message search's query (every field text; bad values answer 400)."""

    topic: str = Field("", description="the topic to search")
    partitions: str = Field("", description="comma-separated partitions; empty: all")
    start: str = Field("newest", description="newest (backwards), oldest, offset, timestamp")
    offsets: str = Field("", description="start=offset: 12 (all partitions) or 0:12,1:40")
    timestamp: str = Field("", description="start=timestamp: ms or ISO date-time")
    resume: str = Field("", description="a previous answer's `resume` (partition:offset,...)")
    key: str = Field("", description="the key contains these bytes (UTF-8)")
    value: str = Field("", description="the value contains these bytes (UTF-8)")
    header: str = Field("", description="a header name=value (or a name: present)")
    regex: str = Field("", description=f"Python re, at most {message_search.REGEX_MAX_LEN} chars")
    regex_on: str = Field("either", description="key, value or either")
    ts_from: str = Field("", description="record timestamp at or after (ms or date-time)")
    ts_to: str = Field("", description="record timestamp at or before (ms or date-time)")
    max_scanned: str = Field(
        "",
        description=f"records to look at (default {message_search.MAX_SCANNED_DEFAULT:,}, "
        f"at most {message_search.MAX_SCANNED_CAP:,})",
    )
    max_ms: str = Field(
        "",
        description=f"time budget in ms (default {message_search.MAX_MS_DEFAULT:,}, "
        f"at most {message_search.MAX_MS_CAP:,})",
    )
    max_results: str = Field(
        "",
        description=f"stop after the round reaching this many matches (default "
        f"{message_search.MAX_RESULTS_DEFAULT}, at most {message_search.MAX_RESULTS_CAP:,})",
    )
    format: str = Field("text", description="text, json (pretty printed) or hex")


class DownloadIn(SearchIn):
    as_: str = Field("jsonl", alias="as", description="jsonl or csv")


@router.get("me", tags=["account"], summary="Who is calling, with which role")
def me(request):
    return {"username": request.auth.get_username(), "role": role_of(request.auth)}


@router.get("cluster", summary="Brokers, controller, partition health counts, ZooKeeper")
def cluster(request):
    viewer(request)
    summary = state.overview()
    summary["zookeeper"] = zk.server_stats()
    summary.pop("topics")
    return summary


@router.get("brokers", summary="Brokers with leaders, replicas and log-dir bytes")
def brokers(request):
    viewer(request)
    rows = state.overview()["brokers"]
    sizes = state.log_dir_bytes(rows)
    return [{**b, "bytes": sizes.get(b["id"])} for b in rows]


@router.get("events", summary="Cluster events, newest first")
def events(request, topic: str = "", kind: str = "", limit: int = 200):
    viewer(request)
    limit = validation.whole(limit, "limit", 1, history.EVENTS_KEEP, "Limit")
    return history.events(limit, topic=topic, kinds=(kind,) if kind else ())


@router.get("audit", tags=["audit"], summary="The audit log, newest first")
def audit_log(request, action: str = "", target: str = "", user: str = "", limit: int = 200):
    viewer(request)
    limit = validation.whole(limit, "limit", 1, audit.MAX_PAGE, "Limit")
    return [e.as_dict() for e in audit.entries(action, target, user, limit)]


@router.get("quotas", tags=["quotas"], summary="Every quota entity and its values")
def list_quotas(request):
    viewer(request)
    return quota_ops.list_all()


@router.put("quotas", tags=["quotas"], summary="Set an entity's quotas")
def put_quota(request, body: QuotaIn):
    values = {k: str(v) for k, v in body.quotas.items()}
    return quota_ops.set_quotas(actor(request), body.user, body.client, values)


@router.delete("quotas", tags=["quotas"], response={204: None}, summary="Remove a quota")
def delete_quota(request, user: str = "", client: str = ""):
    quota_ops.delete(actor(request), user, client)
    return Status(204, None)


@router.get("messages", tags=["messages"], summary="Read records of one partition")
def read_messages(
    request,
    topic: str,
    partition: int = 0,
    mode: str = "end",
    value: str = "",
    limit: int = 50,
    format: str = "text",
):
    viewer(request)
    return message_ops.read(topic, partition, mode, value, limit, format)


@router.get(
    "messages/search",
    tags=["messages"],
    url_name="search_messages",
    summary="Search every partition of a topic, bounded; resume with `resume`",
)
def search_messages(request, q: Query[SearchIn]):
    """Matches merged by timestamp (newest first for start=newest), each with its
    partition and offset; `scanned_per_partition`, `matched`, `stopped` (null,
    max_scanned, max_results or max_ms) and `next`/`resume`: the offsets to continue from
    (null/empty when every partition is exhausted)."""
    viewer(request)
    return message_search.search(message_search.parse(q.dict()))


@router.get(
    "messages/search/download",
    tags=["messages"],
    response={200: None},
    summary="What a search finds, as JSON lines or CSV (X-Quill-* headers: the summary)",
)
def download_messages(request, q: Query[DownloadIn]) -> HttpResponse:
    viewer(request)
    body, content_type, summary = message_search.download(q.dict(by_alias=True))
    return download_response(body, content_type, summary)


@router.post("messages", tags=["messages"], response={201: dict}, summary="Produce one record")
def produce(request, body: MessageIn):
    result = message_ops.produce(
        actor(request), body.topic, body.partition, body.key, body.value, body.headers
    )
    return Status(201, result)
