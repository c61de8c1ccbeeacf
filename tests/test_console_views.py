"""Pages against a real broker: login everywhere, roles on every form, CSRF, the
create/edit/delete flows with their audit entries, and bad input shown as sentences."""

from __future__ import annotations

import json
import uuid

import pytest

from cluster_client import admin, zk
from console.models import AuditEntry
from livefeed import history

pytest_plugins = ["tests.console_helpers"]

PAGES = [
    "/",
    "/events/",
    "/brokers/1/",
    "/topics/",
    "/groups/",
    "/quotas/",
    "/messages/",
    "/audit/",
    "/account/tokens/",
    "/users/",
    "/api/docs",
]
# (url name, path, form) for every form that changes something; least role that may.
FORMS = [
    ("/topics/create", {"name": "x-{u}", "partitions": "1", "replication_factor": "1"}, "operator"),
    ("/topics/{topic}/configs", {"configs": "retention.ms=60000"}, "operator"),
    ("/topics/{topic}/partitions", {"partitions": "2"}, "operator"),
    ("/topics/{topic}/delete", {"confirm": "{topic}"}, "admin"),
    ("/groups/{group}/reset", {"strategy": "earliest", "confirm": "yes"}, "operator"),
    ("/groups/{group}/delete", {}, "admin"),
    ("/quotas/set", {"user": "u-{u}", "producer_byte_rate": "1000"}, "operator"),
    ("/messages/produce", {"topic": "{topic}", "value": "hi"}, "operator"),
    (
        "/users/action",
        {"action": "create", "username": "n-{u}", "password": "a-Long-pass-9", "role": "viewer"},
        "admin",
    ),
]
RANK = {"norole": 0, "viewer": 1, "operator": 2, "admin": 3}


def unique(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_requires_login(console, path):
    response = console.login("anonymous").get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("path", [p for p in PAGES if p != "/users/"])
def test_viewers_see_every_page(console, path):
    assert console.login("viewer").get(path).status_code == 200
    assert console.login("norole").get(path).status_code == 403


def fill(template, values):
    if isinstance(template, str):
        return template.format(**values)
    return {k: fill(v, values) for k, v in template.items()}


@pytest.mark.parametrize("role", ["norole", "viewer", "operator", "admin"])
@pytest.mark.parametrize("form", range(len(FORMS)))
def test_form_permission_matrix(console, form, role):
    path, data, least = FORMS[form]
    topic = unique()
    admin.create_topic(topic, 1, 1, {})
    group = unique("g")
    admin.alter_group_offsets(group, {(topic, 0): 0})
    values = {"topic": topic, "group": group, "u": uuid.uuid4().hex[:6]}
    changes = AuditEntry.objects.exclude(action="denied")  # 403s are audited (issue 25)
    before = changes.count()
    response = console.login(role).post(fill(path, values), fill(data, values))
    if RANK[role] < RANK[least]:
        assert response.status_code == 403
        assert changes.count() == before
        assert AuditEntry.objects.filter(
            action="denied", username=response.wsgi_request.user.username
        ).exists()
    else:
        assert response.status_code in (200, 302), response.content[:2000]
        assert changes.count() == before + 1
        assert AuditEntry.objects.first().source == "ui"


def test_forms_need_csrf(console):
    client = console.login("admin", enforce_csrf=True)
    response = client.post("/topics/create", {"name": unique(), "partitions": "1"})
    assert response.status_code == 403


def test_create_topic_flow_and_detail_page(console):
    client = console.login("operator")
    name = unique()
    response = client.post(
        "/topics/create",
        {
            "name": name,
            "partitions": "3",
            "replication_factor": "1",
            "configs": "retention.ms=3600000",
        },
    )
    assert response.status_code == 302 and response["Location"] == f"/topics/{name}/"
    assert len(zk.assignment(name)) == 3
    assert zk.entity_config(f"topics/{name}") == {"retention.ms": "3600000"}
    page = client.get(f"/topics/{name}/").content.decode()
    assert f'data-k="p:{name}:2:hw"' in page and f'data-k="r:{name}:2:1:leo"' in page
    assert "retention.ms=3600000" in page  # the overrides editor
    assert f'data-live="topic:{name}"' in page
    entry = AuditEntry.objects.first()
    assert (entry.action, entry.target, entry.after["partitions"]) == (
        "topic.create",
        f"topic:{name}",
        3,
    )
    listing = client.get("/topics/?").content.decode()
    assert f'href="/topics/{name}/"' in listing


@pytest.mark.parametrize(
    "form,sentence",
    [
        ({"name": "bad name", "partitions": "1", "replication_factor": "1"}, "letters, digits"),
        ({"name": "ok", "partitions": "0", "replication_factor": "1"}, "between 1"),
        ({"name": "ok", "partitions": "1", "replication_factor": "2"}, "needs 2 live brokers"),
        (
            {
                "name": "ok",
                "partitions": "1",
                "replication_factor": "1",
                "configs": "retention.ms=-7",
            },
            "retention.ms must be between",
        ),
        (
            {"name": "ok", "partitions": "1", "replication_factor": "1", "configs": "colour=blue"},
            "not a topic config",
        ),
    ],
)
def test_bad_topic_input_is_a_sentence_and_changes_nothing(console, form, sentence):
    topics = zk.topic_names()
    response = console.login("operator").post("/topics/create", form)
    assert response.status_code == 400
    assert sentence in response.content.decode()
    assert zk.topic_names() == topics


def test_config_edit_validation_and_fewer_partitions(console):
    client = console.login("operator")
    name = unique()
    admin.create_topic(name, 2, 1, {})
    bad = client.post(f"/topics/{name}/configs", {"configs": "min.insync.replicas=2"})
    assert bad.status_code == 400
    assert "more than the replication factor" in bad.content.decode()
    ok = client.post(f"/topics/{name}/configs", {"configs": "cleanup.policy=compact"})
    assert ok.status_code == 302
    assert zk.entity_config(f"topics/{name}") == {"cleanup.policy": "compact"}
    fewer = client.post(f"/topics/{name}/partitions", {"partitions": "1"})
    assert fewer.status_code == 400 and "cannot remove partitions" in fewer.content.decode()
    unclean = client.post(
        f"/topics/{name}/configs", {"configs": "unclean.leader.election.enable=true"}
    )
    assert unclean.status_code == 403  # can lose data: admins only
    assert zk.entity_config(f"topics/{name}") == {"cleanup.policy": "compact"}


def test_vanished_topic_and_wrong_delete_confirmation(console):
    client = console.login("admin")
    response = client.get("/topics/never-was/", follow=True)
    assert "does not exist" in response.content.decode()
    name = unique()
    admin.create_topic(name, 1, 1, {})
    wrong = client.post(f"/topics/{name}/delete", {"confirm": "nope"})
    assert wrong.status_code == 400 and name in zk.topic_names()
    gone = client.post("/topics/never-was/configs", {"configs": "retention.ms=5"}, follow=True)
    assert "does not exist" in gone.content.decode()


def test_reset_on_an_active_group_is_refused(console):
    from confluent_kafka import Consumer

    name = unique()
    admin.create_topic(name, 1, 1, {})
    gid = unique("g")
    consumer = Consumer(
        {
            "bootstrap.servers": console.cluster.bootstrap,
            "group.id": gid,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([name])
    try:
        for _ in range(40):
            consumer.poll(0.25)
            if admin.describe_group(gid)["members"]:
                break
        response = console.login("operator").post(
            f"/groups/{gid}/reset", {"topic": name, "strategy": "earliest", "confirm": "yes"}
        )
        assert response.status_code == 400
        assert "stop its consumers" in response.content.decode()
    finally:
        consumer.close()


def test_messages_read_and_produce(console):
    client = console.login("operator")
    name = unique()
    admin.create_topic(name, 1, 1, {})
    for value in ['{"n": 1}', '{"n": 2}']:
        client.post(
            "/messages/produce",
            {"topic": name, "partition": "0", "key": "k", "value": value, "headers": "trace=abc"},
        )
    page = client.get(f"/messages/?topic={name}&partition=0&mode=offset&value=1&format=json")
    text = page.content.decode()
    assert page.status_code == 200 and "&quot;n&quot;: 2" in text and "&quot;n&quot;: 1" not in text
    assert "trace=abc" in text
    hexed = client.get(f"/messages/?topic={name}&mode=end&format=hex").content.decode()
    assert "7b 22 6e 22" in hexed  # {"n"
    bad = client.get(f"/messages/?topic={name}&partition=5")
    assert bad.status_code == 400 and "Partition must be between 0 and 0" in bad.content.decode()


def test_quota_form_rejects_negative_values(console):
    response = console.login("operator").post(
        "/quotas/set", {"user": "carol", "consumer_byte_rate": "-1"}
    )
    assert response.status_code == 400
    assert "must be greater than 0" in response.content.decode()
    assert zk.entity_config("users/carol") == {}


def test_admin_manages_roles_and_everyone_their_tokens(console):
    admin_client = console.login("admin")
    name = unique("user")
    admin_client.post(
        "/users/action",
        {"action": "create", "username": name, "password": "a-Long-pass-9", "role": "viewer"},
    )
    admin_client.post("/users/action", {"action": "role", "username": name, "role": "operator"})
    from django.contrib.auth import get_user_model

    from console.roles import role_of

    assert role_of(get_user_model().objects.get(username=name)) == "operator"
    viewer = console.login("viewer")
    page = viewer.post("/account/tokens/action", {"name": "backup script"}).content.decode()
    assert "qk_" in page
    assert [e.action for e in AuditEntry.objects.all()[:3]] == [
        "token.create",
        "user.role",
        "user.create",
    ]


def test_topic_page_names_the_brokers_consumers_read_from(console):
    """The monitor keeps each broker's per-topic BytesOut (see test_fetch_from_follower
    for real scrapes); the topic page lists the brokers that sent the topic's records,
    with the partitions each leads and follows."""
    topic = unique()
    admin.create_topic(topic, 1, 1, {})
    client = console.login("viewer")
    page = client.get(f"/topics/{topic}/").content.decode()
    assert 'id="reads"' in page and "No consumer has read this topic" in page
    reading = {"topic_out": {topic: {"total": 2048.0, "rate": 512.0}, "other": {"total": 1}}}
    history.client().set(history.broker_metrics_key(1), json.dumps(reading), ex=60)
    try:
        page = client.get(f"/topics/{topic}/").content.decode()
    finally:
        history.client().delete(history.broker_metrics_key(1))
    row = page[page.index('id="reads"') :].split("</tr>")[1]
    assert 'href="/brokers/1/"' in row and "2.0 KiB" in row and "512 B/s" in row
    assert "<td>0</td><td>—</td>" in row  # leads partition 0, follows none
