"""Creating and deleting alert rules (operator role, audited), for the API and pages."""

from __future__ import annotations

from alerts.models import STATUSES, AlertEvent, AlertRule
from alerts.webhook import WebhookRefused
from alerts.webhook import check as check_webhook
from cluster_client.errors import NotFound, OpError

# The console's operator role (console.roles); `actor` is the console's Actor (console.ops):
# actor.require(role) refuses with 403, actor.done(...) writes the audit log.
OPERATOR = "operator"


def create(actor, body: dict) -> dict:
    actor.require(OPERATOR)
    name = (body.get("name") or "").strip()
    group = (body.get("group") or "").strip()
    if not group:
        raise OpError("group is the group id (or a glob such as orders-*).", "group")
    statuses = [s.upper() for s in body.get("statuses") or []]
    bad = sorted(set(statuses) - set(STATUSES))
    if bad:
        raise OpError(f"statuses must be among {', '.join(STATUSES)}; not {bad}.", "statuses")
    max_lag_ms = body.get("max_lag_ms")
    if max_lag_ms is not None and (not isinstance(max_lag_ms, int) or max_lag_ms < 0):
        raise OpError("max_lag_ms must be a whole number of milliseconds >= 0.", "max_lag_ms")
    if not statuses and max_lag_ms is None:
        raise OpError("Say when the rule fires: statuses, max_lag_ms or both.", "statuses")
    webhook = (body.get("webhook_url") or "").strip()
    if len(webhook) > AlertRule._meta.get_field("webhook_url").max_length:
        raise OpError("webhook_url is at most 500 characters.", "webhook_url")
    if webhook:
        try:
            check_webhook(webhook)
        except WebhookRefused as exc:
            raise OpError(str(exc), "webhook_url") from None
    emails = [e.strip() for e in body.get("emails") or [] if e.strip()]
    if any("@" not in e for e in emails):
        raise OpError("emails must be e-mail addresses.", "emails")
    if not webhook and not emails:
        raise OpError("Give a webhook_url or emails to notify.", "webhook_url")
    rule = AlertRule.objects.create(
        name=name or group,
        group=group,
        statuses=statuses,
        max_lag_ms=max_lag_ms,
        webhook_url=webhook,
        emails=emails,
        enabled=bool(body.get("enabled", True)),
        created_by=actor.user if actor.user.is_authenticated else None,
    )
    actor.done("alert.create", f"alert:{rule.id}", after=rule.as_dict())
    return rule.as_dict()


def delete(actor, rule_id: int) -> None:
    actor.require(OPERATOR)
    rule = AlertRule.objects.filter(id=rule_id).first()
    if rule is None:
        raise NotFound(f"Alert rule {rule_id} does not exist.")
    before = rule.as_dict()
    rule.delete()
    actor.done("alert.delete", f"alert:{rule_id}", before=before)


def history(group_id: str = "", limit: int = 100) -> list[AlertEvent]:
    qs = AlertEvent.objects.select_related("rule")
    if group_id:
        qs = qs.filter(group_id=group_id)
    return list(qs[:limit])
