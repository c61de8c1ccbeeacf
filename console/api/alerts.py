"""/api/alerts: lag alert rules on consumer groups and the history of what they fired."""

from __future__ import annotations

from ninja import Router, Schema, Status
from pydantic import Field

from alerts import service
from alerts.models import AlertRule
from cluster_client import clusters
from console.api.common import actor, viewer
from console.roles import ADMIN, OPERATOR, has_role

router = Router(tags=["alerts"])


class AlertIn(Schema):
    group: str = Field(..., description="a group id, or a glob such as orders-*")
    name: str = Field("", description="a label (default: the group)")
    statuses: list[str] = Field(
        default_factory=list, description="fire on these statuses: WARN, ERR, STOP, STALL, REWIND"
    )
    max_lag_ms: int | None = Field(None, description="fire when lag in time exceeds this")
    webhook_url: str = Field(
        "",
        description="POSTed a JSON body on firing and resolving; http(s) to a public address "
        "(others only when QUILL_WEBHOOK_ALLOWED_NETWORKS names them)",
    )
    emails: list[str] = Field(default_factory=list, description="sent through Django's mail")
    enabled: bool = True


@router.post("", response={201: dict}, summary="Create a lag alert rule (operator)")
def create_rule(request, body: AlertIn):
    return Status(201, service.create(actor(request), body.dict()))


@router.get("", summary="Alert rules (webhook URLs whole for operators, host only for viewers)")
def list_rules(request):
    secrets = has_role(viewer(request).user, OPERATOR)  # a webhook's path is its secret
    return [r.as_dict(secrets) for r in AlertRule.objects.filter(cluster=clusters.current_name())]


@router.get("/events", summary="Alerts fired and resolved, newest first")
def events(request, group: str = "", limit: int = 100):
    detail = has_role(viewer(request).user, ADMIN)  # delivery errors map the network: admins only
    return [e.as_dict(detail) for e in service.history(group, max(1, min(limit, 1000)))]


@router.put("/{rule_id}", summary="Change a rule, every field as in create (operator)")
def update_rule(request, rule_id: int, body: AlertIn):
    return service.update(actor(request), rule_id, body.dict())


@router.post("/{rule_id}/test", summary="Send the rule's notification now, as a test (operator)")
def test_rule(request, rule_id: int):
    return service.test_fire(actor(request), rule_id).as_dict()


@router.delete("/{rule_id}", response={204: None}, summary="Delete a rule (operator)")
def delete_rule(request, rule_id: int):
    service.delete(actor(request), rule_id)
    return Status(204, None)
