"""Alert rules in the console (issue 29): the Alerts page lists the rules, creates and
changes them with the API's validation (errors beside the field, the text kept), sends a
test notification through the evaluator's notifiers to a real webhook listener, and
deletes after a confirm step; viewers read, operators change, every change audited."""

from __future__ import annotations

import json

import pytest

from console.models import AuditEntry
from tests.ops_helpers import unique

pytestmark = [pytest.mark.cluster]
pytest_plugins = ["tests.console_helpers", "tests.webhook_helpers"]


def _rules(client) -> dict[int, dict]:
    r = client.get("/api/alerts")
    assert r.status_code == 200
    return {rule["id"]: rule for rule in r.json()}


def _create(client, **fields) -> dict:
    before = set(_rules(client))
    r = client.post("/alerts/save", fields)
    assert r.status_code == 302, r.content.decode()[:2000]
    (new,) = set(_rules(client)) - before
    return _rules(client)[new]


def test_create_edit_and_delete_read_back_through_the_api(console):
    client = console.login("operator")
    group = unique("orders")
    rule = _create(
        client,
        name="orders lag",
        group=group,
        statuses=["STOP", "err"],
        max_lag_ms="60000",
        emails="ops@example.com, oncall@example.com",
        enabled="on",
    )
    assert rule == {
        "id": rule["id"],
        "name": "orders lag",
        "group": group,
        "statuses": ["STOP", "ERR"],
        "max_lag_ms": 60000,
        "webhook_url": "",
        "emails": ["ops@example.com", "oncall@example.com"],
        "enabled": True,
    }
    html = client.get("/alerts/").content.decode()
    assert f'id="rule-{rule["id"]}"' in html and "2 e-mails" in html and "1 min 0 s" in html

    # the edit form holds the rule; saving changes it in place
    html = client.get(f"/alerts/?edit={rule['id']}").content.decode()
    assert f'name="id" value="{rule["id"]}"' in html and f'value="{group}"' in html
    assert 'value="STOP" checked' in html and 'value="WARN" checked' not in html
    r = client.post(
        "/alerts/save",
        {
            "id": str(rule["id"]),
            "name": "orders lag",
            "group": group + "-*",
            "statuses": ["WARN"],
            "max_lag_ms": "",
            "emails": "ops@example.com",
        },
    )
    assert r.status_code == 302
    changed = _rules(client)[rule["id"]]
    assert changed["group"] == group + "-*" and changed["statuses"] == ["WARN"]
    assert changed["max_lag_ms"] is None and changed["emails"] == ["ops@example.com"]
    assert changed["enabled"] is False  # the box was left unticked

    entries = AuditEntry.objects.filter(target=f"alert:{rule['id']}").order_by("id")
    assert [(e.action, e.source, e.ok) for e in entries] == [
        ("alert.create", "ui", True),
        ("alert.update", "ui", True),
    ]
    assert entries[1].before["group"] == group and entries[1].after["group"] == group + "-*"

    html = client.get("/alerts/").content.decode()
    assert f'data-confirm="Delete the alert rule orders lag on {group}-*?' in html
    assert client.post(f"/alerts/{rule['id']}/delete").status_code == 302
    assert rule["id"] not in _rules(client)
    last = AuditEntry.objects.filter(target=f"alert:{rule['id']}").order_by("id").last()
    assert last.action == "alert.delete" and last.before["group"] == group + "-*"


def test_refused_input_keeps_the_text_and_says_why_beside_the_field(console):
    client = console.login("operator")
    group = unique("typed")
    before = _rules(client)
    r = client.post(
        "/alerts/save",
        {"name": "my rule", "group": group, "max_lag_ms": "ten minutes", "emails": "a@b.c"},
    )
    assert r.status_code == 400
    html = r.content.decode()
    assert 'value="ten minutes"' in html and f'value="{group}"' in html
    assert 'value="my rule"' in html
    assert (
        '<div class="field-error">max_lag_ms must be a whole number of milliseconds &gt;= 0.'
        in html
    )
    # the webhook is checked as the API checks it: a private address is refused
    r = client.post(
        "/alerts/save",
        {"group": group, "statuses": ["STOP"], "webhook_url": "http://10.1.2.3/hook"},
    )
    assert r.status_code == 400
    html = r.content.decode()
    assert 'value="http://10.1.2.3/hook"' in html and 'value="STOP" checked' in html
    assert '<div class="field-error">webhook host &#x27;10.1.2.3&#x27; resolves to' in html
    r = client.post("/alerts/save", {"group": "", "statuses": ["STOP"], "emails": "a@b.c"})
    assert (
        r.status_code == 400
        and '<div class="field-error">group is the group id' in r.content.decode()
    )
    assert _rules(client) == before  # nothing was made

    # editing: the same checks, and the rule is left as it was
    rule = _create(client, group=group, statuses=["STOP"], emails="a@b.c", enabled="on")
    r = client.post(
        "/alerts/save",
        {"id": str(rule["id"]), "group": group, "emails": "not-an-address", "max_lag_ms": "5"},
    )
    assert r.status_code == 400
    html = r.content.decode()
    assert 'value="not-an-address"' in html and f'name="id" value="{rule["id"]}"' in html
    assert '<div class="field-error">emails must be e-mail addresses.' in html
    assert _rules(client)[rule["id"]] == rule
    # and through the API's PUT
    body = {**rule, "statuses": ["NOPE"]}
    r = client.put(f"/api/alerts/{rule['id']}", json.dumps(body), "application/json")
    assert r.status_code == 400 and "statuses" in r.json()["errors"]
    assert _rules(client)[rule["id"]] == rule


def test_viewers_read_the_page_and_get_403_on_every_change(console, webhook, settings):
    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the listener is loopback
    url, received = webhook
    host = url.rsplit("/", 1)[0]
    rule = _create(
        console.login("operator"),
        group=unique("g"),
        statuses=["STOP"],
        webhook_url=f"{host}/services/T000/SECRET-TOKEN?key=KEY-xyz",
        enabled="on",
    )
    viewer = console.login("viewer")
    assert 'href="/alerts/" id="alert-rules-link"' in viewer.get("/groups/").content.decode()
    r = viewer.get("/alerts/")
    html = r.content.decode()
    assert r.status_code == 200 and f'id="rule-{rule["id"]}"' in html
    assert 'id="alert-form"' not in html and 'name="test"' not in html
    # the table shows where the webhook goes, never its path or query (the secret)
    assert f'<span class="webhook">{host}/…</span>' in html
    assert "SECRET-TOKEN" not in html and "KEY-xyz" not in html
    for path, data in (
        ("/alerts/save", {"group": "x", "statuses": ["STOP"], "emails": "a@b.c"}),
        ("/alerts/save", {"id": str(rule["id"]), "group": "x", "statuses": ["STOP"]}),
        (f"/alerts/{rule['id']}/test", {}),
        (f"/alerts/{rule['id']}/delete", {}),
    ):
        assert viewer.post(path, data).status_code == 403, path
    assert viewer.post(f"/api/alerts/{rule['id']}/test").status_code == 403
    # the API shows viewers where the webhook goes, as the page does; operators see it whole
    assert _rules(viewer)[rule["id"]] == {**rule, "webhook_url": f"{host}/…"}
    assert _rules(console.login("operator"))[rule["id"]] == rule
    made = AuditEntry.objects.get(target=f"alert:{rule['id']}", action="alert.create")
    assert "SECRET-TOKEN" not in json.dumps(made.after) and made.after["webhook_url"] == f"{host}/…"
    assert received == []
    assert not AuditEntry.objects.filter(
        target=f"alert:{rule['id']}", action__in=["alert.update", "alert.test", "alert.delete"]
    ).exists()


def test_test_fire_reaches_the_webhook_and_is_kept_as_a_test(console, webhook, settings):
    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the listener is loopback
    url, received = webhook
    operator = console.login("operator")
    group = unique("pay")
    rule = _create(operator, name="payments", group=group, statuses=["ERR"], webhook_url=url)
    r = operator.post(f"/alerts/{rule['id']}/test", follow=True)
    assert r.status_code == 200
    html = r.content.decode()
    assert "Test sent: webhook delivered." in html
    assert len(received) == 1
    body = received[0]
    username = r.wsgi_request.user.get_username()
    assert body == {
        "event": "test",
        "rule": "payments",
        "group": group,
        "status": "TEST",
        "reason": f"test fired by {username}",
        "lag": 0,
        "lag_ms": None,
        "partitions": [],
        "at": body["at"],
    }
    events = operator.get(f"/api/alerts/events?group={group}").json()
    assert [(e["rule"], e["kind"], e["delivered"]) for e in events] == [
        (rule["id"], "test", {"webhook": "delivered"})
    ]
    assert f"test ({group})" not in html and "webhook delivered" in html  # last event column
    audit = AuditEntry.objects.get(target=f"alert:{rule['id']}", action="alert.test")
    assert audit.after == {"delivered": {"webhook": "HTTP 200"}}


def test_a_test_fire_does_not_restart_a_firing_episode(console, webhook, settings):
    """The evaluator fires once per episode: a test sent while a rule is firing must not
    read as "not firing" (which would fire the same episode again)."""
    import time

    from alerts import tasks
    from alerts.models import AlertRule
    from livefeed import history

    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    url, received = webhook
    operator = console.login("operator")
    group = unique("stuck")
    status = {"status": "STOP", "at": time.time(), "lag": 7, "lag_ms": 900, "partitions": {}}
    history.client().set(history.group_key(group), json.dumps(status), ex=60)
    rule = _create(operator, group=group, statuses=["STOP"], webhook_url=url, enabled="on")
    row = AlertRule.objects.get(id=rule["id"])
    assert [e.kind for e in tasks.evaluate_rule(row, [group], time.time())] == ["firing"]
    assert operator.post(f"/alerts/{rule['id']}/test").status_code == 302
    assert tasks.evaluate_rule(row, [group], time.time()) == []
    assert [b["event"] for b in received] == ["firing", "test"]
