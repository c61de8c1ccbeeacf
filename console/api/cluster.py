"""/api/cluster, /api/brokers, /api/quotas, /api/messages, /api/events, /api/audit,
/api/me."""

from __future__ import annotations

from ninja import Router, Schema, Status
from pydantic import Field

from cluster_client import state, zk
from console import audit
from console.api.common import actor, viewer
from console.ops import messages as message_ops
from console.ops import quotas as quota_ops
from console.ops import validation
from console.roles import role_of
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


@router.post("messages", tags=["messages"], response={201: dict}, summary="Produce one record")
def produce(request, body: MessageIn):
    result = message_ops.produce(
        actor(request), body.topic, body.partition, body.key, body.value, body.headers
    )
    return Status(201, result)
