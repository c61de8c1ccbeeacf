"""The REST API against a real broker: the permission matrix (every mutating endpoint
against every role), token auth, JSON errors with field detail, the OpenAPI schema."""

from __future__ import annotations

import json
import uuid

import pytest

from cluster_client import admin, zk
from console.models import ApiToken, AuditEntry

pytest_plugins = ["tests.console_helpers"]
ROLES = ("anonymous", "norole", "viewer", "operator", "admin")


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def call(client, method: str, path: str, body=None, **headers):
    kwargs = {"content_type": "application/json", **headers}
    if body is not None:
        kwargs["data"] = json.dumps(body)
    return getattr(client, method)(path, **kwargs)


def new_topic(partitions: int = 1) -> str:
    name = unique()
    admin.create_topic(name, partitions, 1, {})
    return name


def idle_group(topic: str) -> str:
    """A group with committed offsets and no members."""
    gid = unique("g")
    admin.alter_group_offsets(gid, {(topic, 0): 0})
    return gid


# (method, path maker, body maker, least role, success status)
ENDPOINTS = {
    "create topic": (
        "post",
        lambda: "/api/topics",
        lambda: {"name": unique(), "partitions": 1, "replication_factor": 1},
        "operator",
        201,
    ),
    "delete topic": ("delete", lambda: f"/api/topics/{new_topic()}", lambda: None, "admin", 204),
    "alter configs": (
        "patch",
        lambda: f"/api/topics/{new_topic()}/configs",
        lambda: {"set": {"retention.ms": "3600000"}},
        "operator",
        200,
    ),
    "add partitions": (
        "post",
        lambda: f"/api/topics/{new_topic()}/partitions",
        lambda: {"count": 2},
        "operator",
        200,
    ),
    "reset offsets": (
        "post",
        lambda: f"/api/groups/{idle_group(new_topic())}/reset",
        lambda: {"strategy": "latest", "dry_run": False},
        "operator",
        200,
    ),
    "delete group": (
        "delete",
        lambda: f"/api/groups/{idle_group(new_topic())}",
        lambda: None,
        "admin",
        204,
    ),
    "set quota": (
        "put",
        lambda: "/api/quotas",
        lambda: {"user": unique("u"), "quotas": {"producer_byte_rate": 1024}},
        "operator",
        200,
    ),
    "delete quota": (
        "delete",
        lambda: f"/api/quotas?user={quota_user()}",
        lambda: None,
        "operator",
        204,
    ),
    "change alert rule": (
        "put",
        lambda: f"/api/alerts/{alert_rule()}",
        lambda: {"group": unique("g"), "max_lag_ms": 60000, "emails": ["ops@example.com"]},
        "operator",
        200,
    ),
    "test-fire alert rule": (
        "post",
        lambda: f"/api/alerts/{alert_rule()}/test",
        lambda: None,
        "operator",
        200,
    ),
    "produce": (
        "post",
        lambda: "/api/messages",
        lambda: {"topic": new_topic(), "key": "k", "value": "v"},
        "operator",
        201,
    ),
}
RANK = {"anonymous": -1, "norole": 0, "viewer": 1, "operator": 2, "admin": 3}


def quota_user() -> str:
    user = unique("u")
    zk.set_entity_config(f"users/{user}", {"consumer_byte_rate": "2048"})
    return user


def alert_rule() -> int:
    """A rule that e-mails (Django's test mail outbox), made without the API."""
    from alerts.models import AlertRule

    rule = AlertRule.objects.create(group=unique("g"), statuses=["STOP"], emails=["a@b.c"])
    return rule.id


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_permission_matrix(console, endpoint, role):
    method, path, body, least, ok = ENDPOINTS[endpoint]
    client = console.login(role)
    changes = AuditEntry.objects.exclude(action="denied")
    before = changes.count()
    response = call(client, method, path(), body())
    if role == "anonymous":
        expected = 401
    elif RANK[role] < RANK[least]:
        expected = 403
    else:
        expected = ok
    assert response.status_code == expected, response.content
    if expected >= 400:
        assert response.json()["detail"]
        assert changes.count() == before  # refused: nothing changed, no change logged
        if expected == 403:  # the refusal itself is on the record (issue 25)
            denied = AuditEntry.objects.filter(action="denied").first()
            assert denied.target.startswith(f"{method.upper()} /api/") and not denied.ok
    else:
        entry = AuditEntry.objects.first()
        assert changes.count() == before + 1
        assert (entry.source, entry.ok) == ("api", True)


@pytest.mark.parametrize("role", ROLES)
def test_reads_need_a_role(console, role):
    response = console.login(role).get("/api/topics")
    assert response.status_code == {"anonymous": 401, "norole": 403}.get(role, 200)


def test_token_auth_acts_with_the_users_role(console):
    from console.changes import Actor
    from console.changes.users import issue_token

    operator = console.user("operator")
    _, raw = issue_token(Actor(operator, "ui"), "ci script")
    from django.test import Client

    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get("/api/me", **auth).json() == {
        "username": operator.username,
        "role": "operator",
    }
    name = unique()
    created = call(client, "post", "/api/topics", {"name": name, "partitions": 2}, **auth)
    assert created.status_code == 201
    assert AuditEntry.objects.first().username == operator.username
    assert call(client, "delete", f"/api/topics/{name}", **auth).status_code == 403
    assert client.get("/api/me", HTTP_AUTHORIZATION="Bearer qk_wrong").status_code == 401
    assert ApiToken.objects.get(user=operator).last_used is not None


def test_topic_detail_has_partitions_and_replica_offsets(console):
    name = new_topic(partitions=2)
    call(
        console.login("operator"),
        "post",
        "/api/messages",
        {"topic": name, "partition": 1, "value": "hello"},
    )
    body = console.login("viewer").get(f"/api/topics/{name}").json()
    p1 = body["partitions"][1]
    assert (p1["leader"], p1["isr"], p1["start"], p1["hw"]) == (1, [1], 0, 1)
    assert p1["replicas_detail"][0]["leo"] == 1 and p1["replicas_detail"][0]["size"] > 0
    assert console.login("viewer").get("/api/topics/nope-none").status_code == 404


@pytest.mark.parametrize(
    "body,field",
    [
        ({"name": "bad name!", "partitions": 1}, "name"),
        ({"name": "ok-name", "partitions": 0}, "partitions"),
        ({"name": "ok-name", "replication_factor": 3}, "replication_factor"),
        ({"name": "ok-name", "configs": {"retention.ms": "soon"}}, "configs.retention.ms"),
        ({"name": "ok-name", "configs": {"no.such.key": "1"}}, "configs.no.such.key"),
        ({"partitions": 1}, "name"),  # schema validation: a missing field
        ({"name": "ok-name", "partitions": "many"}, "partitions"),
    ],
)
def test_bad_input_is_a_400_with_field_errors_and_changes_nothing(console, body, field):
    topics = set(zk.topic_names())
    response = call(console.login("admin"), "post", "/api/topics", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"], response.json()
    assert set(zk.topic_names()) == topics


def test_fewer_partitions_and_negative_quotas_are_refused(console):
    client = console.login("operator")
    name = new_topic(partitions=3)
    response = call(client, "post", f"/api/topics/{name}/partitions", {"count": 2})
    assert response.status_code == 400
    assert "has 3 partitions" in response.json()["errors"]["partitions"]
    assert len(zk.assignment(name)) == 3
    response = call(
        client, "put", "/api/quotas", {"user": "bob", "quotas": {"consumer_byte_rate": -5}}
    )
    assert response.status_code == 400
    assert "quotas.consumer_byte_rate" in response.json()["errors"]
    assert zk.entity_config("users/bob") == {}
    gone = call(client, "patch", "/api/topics/vanished/configs", {"set": {"retention.ms": "1"}})
    assert gone.status_code == 404 and gone.json()["errors"] == {"topic": gone.json()["detail"]}


def test_quota_writes_znode_and_change_notification(console):
    client = console.login("operator")
    before = set(zk.children("/config/changes"))
    response = call(
        client,
        "put",
        "/api/quotas",
        {"user": "alice", "client": "app-1", "quotas": {"producer_byte_rate": 1048576}},
    )
    assert response.status_code == 200
    assert zk.entity_config("users/alice/clients/app-1") == {"producer_byte_rate": "1048576"}
    fresh = set(zk.children("/config/changes")) - before
    assert len(fresh) == 1
    notice = json.loads(zk.client().get(f"/config/changes/{fresh.pop()}")[0])
    assert notice == {"version": 2, "entity_path": "users/alice/clients/app-1"}
    listed = console.login("viewer").get("/api/quotas").json()
    assert {
        "user": "alice",
        "client": "app-1",
        "entity_path": "users/alice/clients/app-1",
        "quotas": {"producer_byte_rate": "1048576"},
    } in listed


def test_reset_dry_run_then_confirm_and_refusal_for_active_groups(console):
    name = new_topic()
    call(console.login("operator"), "post", "/api/messages", {"topic": name, "value": "a"})
    gid = idle_group(name)
    client = console.login("operator")
    path = f"/api/groups/{gid}/reset"
    dry = call(client, "post", path, {"strategy": "latest", "topic": name})
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    assert dry.json()["partitions"][0] | {"current": 0, "new": 1} == dry.json()["partitions"][0]
    assert admin.group_offsets(gid) == {(name, 0): 0}  # a dry run changes nothing
    done = call(client, "post", path, {"strategy": "shift", "value": "1", "dry_run": False})
    assert done.status_code == 200
    assert admin.group_offsets(gid) == {(name, 0): 1}
    entry = AuditEntry.objects.first()
    assert (entry.action, entry.before, entry.after["offsets"]) == (
        "group.reset",
        {f"{name}/0": 0},
        {f"{name}/0": 1},
    )
    bad = call(client, "post", path, {"strategy": "sideways"})
    assert bad.status_code == 400 and "strategy" in bad.json()["errors"]


def test_schema_docs_audit_and_events(console):
    viewer = console.login("viewer")
    schema = viewer.get("/api/schema").json()
    assert {
        "/api/topics",
        "/api/groups/{group_id}/reset",
        "/api/quotas",
        "/api/audit",
        "/api/events",
    } <= set(schema["paths"])
    assert "BearerAuth" in json.dumps(
        schema["components"]["securitySchemes"]
    ) or "TokenAuth" in json.dumps(schema["components"]["securitySchemes"])
    assert viewer.get("/api/docs").status_code == 200
    assert console.login("anonymous").get("/api/docs").status_code == 302
    call(console.login("operator"), "post", "/api/topics", {"name": unique()})
    audit = viewer.get("/api/audit?action=topic.create").json()
    assert audit and audit[0]["action"] == "topic.create" and audit[0]["after"]["partitions"] == 1
    assert viewer.get("/api/events").status_code == 200
