"""Creating, changing, test-firing and deleting alert rules (operator role, audited),
for the API and the pages."""

from __future__ import annotations

import re

from alerts.models import STATUSES, TEST, AlertEvent, AlertRule
from alerts.webhook import WebhookRefused
from alerts.webhook import check as check_webhook
from cluster_client import clusters
from cluster_client.errors import NotFound, OpError

# The console's operator role (console.roles); `actor` is the console's Actor (console.changes):
# actor.require(role) refuses with 403, actor.done(...) writes the audit log.
OPERATOR = "operator"


def _max_lag_ms(value):
    """None, or a whole number of ms >= 0; a form's text ("", "60000") is read too."""
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        if re.fullmatch(r"\d+", value):
            return int(value)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise OpError("max_lag_ms must be a whole number of milliseconds >= 0.", "max_lag_ms")


def _emails(value) -> list[str]:
    """A list, or a form's text with addresses split by commas, spaces or lines."""
    if isinstance(value, str):
        value = re.split(r"[\s,;]+", value)
    return [e.strip() for e in value or [] if e.strip()]


def clean(body: dict) -> dict:
    """The rule's fields from an API body or a form, or OpError naming the field."""
    name = (body.get("name") or "").strip()
    group = (body.get("group") or "").strip()
    if not group:
        raise OpError("group is the group id (or a glob such as orders-*).", "group")
    if len(group) > AlertRule._meta.get_field("group").max_length:
        raise OpError("group is at most 255 characters.", "group")
    if len(name) > AlertRule._meta.get_field("name").max_length:
        raise OpError("name is at most 100 characters.", "name")
    statuses = [s.upper() for s in body.get("statuses") or []]
    bad = sorted(set(statuses) - set(STATUSES))
    if bad:
        raise OpError(f"statuses must be among {', '.join(STATUSES)}; not {bad}.", "statuses")
    max_lag_ms = _max_lag_ms(body.get("max_lag_ms"))
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
    emails = _emails(body.get("emails"))
    if any("@" not in e for e in emails):
        raise OpError("emails must be e-mail addresses.", "emails")
    if not webhook and not emails:
        raise OpError("Give a webhook_url or emails to notify.", "webhook_url")
    return {
        "name": name or group,
        "group": group,
        "statuses": statuses,
        "max_lag_ms": max_lag_ms,
        "webhook_url": webhook,
        "emails": emails,
        "enabled": bool(body.get("enabled", True)),
    }


def get(rule_id: int) -> AlertRule:
    rule = AlertRule.objects.filter(id=rule_id, cluster=clusters.current_name()).first()
    if rule is None:
        raise NotFound(f"Alert rule {rule_id} does not exist.")
    return rule


def create(actor, body: dict) -> dict:
    actor.require(OPERATOR)
    fields = clean(body)
    rule = AlertRule.objects.create(
        **fields,
        cluster=clusters.current_name(),
        created_by=actor.user if actor.user.is_authenticated else None,
    )
    actor.done("alert.create", f"alert:{rule.id}", after=rule.as_dict(secrets=False))
    return rule.as_dict()


def update(actor, rule_id: int, body: dict) -> dict:
    actor.require(OPERATOR)
    rule = get(rule_id)
    fields = clean(body)
    before = rule.as_dict(secrets=False)  # viewers read the audit log
    for key, value in fields.items():
        setattr(rule, key, value)
    rule.save(update_fields=list(fields))
    after = rule.as_dict(secrets=False)
    actor.done("alert.update", f"alert:{rule.id}", before=before, after=after)
    return rule.as_dict()


def test_fire(actor, rule_id: int) -> AlertEvent:
    """Send the rule's notification now, through the evaluator's notifiers, and keep it
    in the history as a "test" event (the evaluator's episodes skip those)."""
    from alerts.tasks import notify  # the Celery tasks module, loaded only when used

    actor.require(OPERATOR)
    rule = get(rule_id)
    who = actor.user.get_username() if actor.user.is_authenticated else "anonymous"
    event = AlertEvent.objects.create(
        rule=rule, group_id=rule.group, kind=TEST, status="TEST", reason=f"test fired by {who}"
    )
    event.delivered = notify(event)
    event.save(update_fields=["delivered"])
    actor.done("alert.test", f"alert:{rule.id}", after={"delivered": event.delivered})
    return event


def delete(actor, rule_id: int) -> None:
    actor.require(OPERATOR)
    rule = get(rule_id)
    before = rule.as_dict(secrets=False)
    rule.delete()
    actor.done("alert.delete", f"alert:{rule_id}", before=before)


def last_events(rules) -> dict[int, AlertEvent]:
    """Each rule's newest event (firing, resolved or test), by rule id."""
    out: dict[int, AlertEvent] = {}
    for event in AlertEvent.objects.filter(rule__in=list(rules)).order_by("-at", "-id"):
        out.setdefault(event.rule_id, event)
    return out


def history(group_id: str = "", limit: int = 100) -> list[AlertEvent]:
    qs = AlertEvent.objects.select_related("rule").filter(rule__cluster=clusters.current_name())
    if group_id:
        qs = qs.filter(group_id=group_id)
    return list(qs[:limit])
