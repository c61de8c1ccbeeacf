"""Lag alert evaluation (Celery beat, every QUILL_ALERT_EVALUATE_S) and its notifiers.

For each enabled rule and each group it matches (glob on the group id), the monitor's
latest group status (livefeed.history; older than STALE_S is ignored) fires when the
group's or a partition's Burrow status is one the rule names, or when its lag in time
exceeds max_lag_ms. A rule fires once per episode and sends a "resolved" when the
condition clears. Notifiers as Burrow's: an HTTP webhook (POST, JSON: event, rule,
group, status, lag, lag_ms, partitions), to public addresses only (alerts.webhook),
and e-mail through Django's mail backend; each delivery's outcome is kept on the event.
A rule that fails to evaluate is logged and the next one runs.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import time

from alerts import webhook
from alerts.models import FIRING, RESOLVED, TEST, AlertEvent, AlertRule
from cluster_client import admin, clusters
from livefeed import history
from workers.celery import app

log = logging.getLogger(__name__)
STALE_S = 60.0
WEBHOOK_TIMEOUT_S = 5.0


def _groups() -> list[str]:
    return [g["group_id"] for g in admin.list_groups()]


def _partitions(status: dict) -> list[dict]:
    out = []
    for key, row in sorted(status.get("partitions", {}).items()):
        topic, _, partition = key.rpartition("/")
        out.append(
            {
                "topic": topic,
                "partition": int(partition),
                "status": row.get("status"),
                "lag": row.get("lag"),
                "lag_ms": row.get("lag_ms"),
            }
        )
    return out


def breach(rule: AlertRule, status: dict) -> str | None:
    """Why this group status fires the rule, or None."""
    wanted = set(rule.statuses or [])
    if status.get("status") in wanted:
        return f"status {status['status']}"
    hit = sorted(
        k for k, row in status.get("partitions", {}).items() if row.get("status") in wanted
    )
    if hit:
        return f"partition {hit[0]} is {status['partitions'][hit[0]]['status']}"
    lag_ms = status.get("lag_ms") or 0
    if rule.max_lag_ms is not None and lag_ms > rule.max_lag_ms:
        return f"lag {lag_ms} ms over {rule.max_lag_ms} ms"
    return None


def deliver_webhook(url: str, body: bytes) -> str:
    """ "HTTP <status>" or "failed: <why>" (kept for admins; viewers see delivered or
    failed only, AlertEvent.summary). Never raises: a bad URL is one failed delivery."""
    try:
        return f"HTTP {webhook.post(url, body, WEBHOOK_TIMEOUT_S)}"
    except webhook.WebhookRefused as exc:
        return f"failed: refused: {exc}"
    except Exception as exc:  # noqa: BLE001 - any failure is recorded, never raised
        return f"failed: {exc or type(exc).__name__}"


def notify(event: AlertEvent) -> dict:
    rule = event.rule
    body = {
        "event": event.kind,
        "rule": rule.name,
        "group": event.group_id,
        "status": event.status,
        "reason": event.reason,
        "lag": event.lag,
        "lag_ms": event.lag_ms,
        "partitions": event.partitions,
        "at": event.at.isoformat(),
    }
    delivered = {}
    if rule.webhook_url:
        delivered["webhook"] = deliver_webhook(rule.webhook_url, json.dumps(body).encode())
    if rule.emails:
        from django.core.mail import send_mail

        subject = f"[quill] {event.group_id} {event.kind}: {event.reason or event.status}"
        try:
            send_mail(subject, json.dumps(body, indent=2), None, rule.emails)
            delivered["email"] = "sent"
        except Exception as exc:  # noqa: BLE001 - any mail failure is recorded, not raised
            delivered["email"] = f"failed: {exc}"
    return delivered


def evaluate_rule(rule: AlertRule, groups: list[str], now: float) -> list[AlertEvent]:
    made = []
    for gid in groups:
        if not fnmatch.fnmatchcase(gid, rule.group):
            continue
        status = history.group_status(gid)
        if not status or now - status.get("at", 0) > STALE_S:
            continue
        why = breach(rule, status)
        last = AlertEvent.objects.filter(rule=rule, group_id=gid).exclude(kind=TEST).first()
        firing = last is not None and last.kind == FIRING
        if bool(why) == firing:
            continue
        event = AlertEvent.objects.create(
            rule=rule,
            group_id=gid,
            kind=FIRING if why else RESOLVED,
            status=status.get("status") or "",
            lag=status.get("lag") or 0,
            lag_ms=status.get("lag_ms"),
            partitions=_partitions(status),
            reason=why or "cleared",
        )
        event.delivered = notify(event)
        event.save(update_fields=["delivered"])
        log.info("alert %s %s for group %s: %s", rule.name, event.kind, gid, event.reason)
        made.append(event)
    return made


@app.task(name="quill.alerts.evaluate", ignore_result=True)
def evaluate() -> int:
    rules = list(AlertRule.objects.filter(enabled=True))
    by_cluster: dict[str, list[AlertRule]] = {}
    for rule in rules:
        by_cluster.setdefault(rule.cluster, []).append(rule)
    made = 0
    for name, cluster_rules in by_cluster.items():
        try:
            with clusters.activate(name):  # each rule looks at its own cluster's groups
                made += _evaluate(cluster_rules)
        except Exception:  # noqa: BLE001 - one cluster down never stops the others
            log.exception("alert rules of cluster %s could not be evaluated", name)
    return made


def _evaluate(rules: list[AlertRule]) -> int:
    groups = _groups()
    now = time.time()
    made = 0
    for rule in rules:
        try:
            made += len(evaluate_rule(rule, groups, now))
        except Exception:  # noqa: BLE001 - one bad rule never stops the others
            log.exception("alert rule %s (%s) could not be evaluated", rule.id, rule.name)
    return made
