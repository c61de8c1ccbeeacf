"""Operations pages in the console (Django's test client, one real broker): who sees
which start buttons, the refusals as sentences with nothing started, the pages render,
and starts and refusals reach the audit log. The worker side is in test_ops_jobs.py."""

from __future__ import annotations

from console.models import AuditEntry
from operations.models import Operation

pytest_plugins = ["tests.console_helpers"]


def test_start_buttons_follow_the_role(console):
    viewer = console.login("viewer").get("/").content.decode()
    operator = console.login("operator").get("/").content.decode()
    admin = console.login("admin").get("/").content.decode()
    assert 'id="propose-rebalance"' not in viewer
    assert 'id="propose-rebalance"' in operator and 'id="rolling-restart"' not in operator
    assert 'id="rolling-restart"' in admin and 'id="decommission"' in admin
    assert console.login("viewer").get("/operations/").status_code == 200


def test_refusals_are_sentences_and_start_nothing(console):
    operator = console.login("operator")
    page = operator.post("/operations/start", {"kind": "rolling-restart"}, follow=True)
    assert "This needs the admin role." in page.content.decode()
    page = operator.post(
        "/operations/start",
        {"kind": "rebalance", "goal": "remove-broker", "brokers": "9"},
        follow=True,
    )
    assert "Unknown or offline broker(s) [9]." in page.content.decode()
    page = operator.post("/operations/start", {"kind": "compact", "topic": "nope"}, follow=True)
    assert "Topic &#x27;nope&#x27; does not exist." in page.content.decode()
    assert Operation.objects.count() == 0


def test_a_started_election_is_audited_and_shown(console):
    operator = console.login("operator")
    response = operator.post("/operations/start", {"kind": "elect-leaders"})
    op = Operation.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/operations/{op.id}/"
    assert op.kind == "elect-leaders" and op.state == "pending"
    entry = AuditEntry.objects.get(action="operation.start")
    assert entry.target == f"operation:{op.id}" and entry.after["kind"] == "elect-leaders"
    page = operator.get(f"/operations/{op.id}/").content.decode()
    assert f'data-k="op:{op.id}:state"' in page and "pending" in page
    operator.post(f"/operations/{op.id}/action", {"action": "cancel"})
    op.refresh_from_db()
    assert op.cancel_requested
    assert AuditEntry.objects.filter(action="operation.cancel").count() == 1


def test_a_compacted_topic_page_shows_the_cleaner_status(console):
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.console_helpers import unique

    topic = unique("cleaned")
    admin = AdminClient({"bootstrap.servers": console.cluster.bootstrap})
    new = NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(30)
    page = console.login("operator").get(f"/topics/{topic}/").content.decode()
    assert 'id="cleaner-status"' in page and 'id="cleaner-refresh"' in page
    assert "No figures yet" in page
    plain = unique("plain")
    admin.create_topics([NewTopic(plain, 1, 1)])[plain].result(30)
    assert (
        'id="cleaner-status"'
        not in console.login("viewer").get(f"/topics/{plain}/").content.decode()
    )
