"""The console's security pages and /api/security against a real broker and ZooKeeper:
admin only (reads too), SCRAM passwords set, changed and deleted through the Kafka
protocol (the stored credential proves the new password and refuses the old one), bad
input refused with the field named and nothing changed, every change audited without
the password."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlencode

import pytest

from console.models import AuditEntry
from console.roles import ADMIN, OPERATOR, VIEWER

from .scram_helpers import password_works, stored_credentials

pytest_plugins = ["tests.console_helpers"]
pytestmark = pytest.mark.cluster

PAGES = ("/security/scram-users/", "/security/acls/")
APIS = ("/api/security/scram-users", "/api/security/acls")


@pytest.fixture(scope="module")
def console_cluster(cluster_factory):
    """Kafka's AclAuthorizer on; the cluster keeps no ACL, so the console (User:ANONYMOUS
    over PLAINTEXT) may do everything, and the ACLs the tests add name other users."""
    return cluster_factory(
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )


@pytest.fixture(scope="module")
def zk(console_cluster):
    return console_cluster.zk_client()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _audit_text() -> str:
    rows = AuditEntry.objects.values_list("before", "after", "detail", "target")
    return json.dumps(list(rows))


@pytest.mark.parametrize("role", ["anonymous", "norole", VIEWER, OPERATOR])
def test_only_admins_see_security(console, role):
    client = console.login(role)
    for path in PAGES:
        answer = client.get(path)
        assert answer.status_code == (302 if role == "anonymous" else 403), path
    for path in APIS:
        answer = client.get(path)
        assert answer.status_code == (401 if role == "anonymous" else 403), path
    if role != "anonymous":
        assert b'href="/security/scram-users/"' not in client.get("/audit/").content
    answer = client.post(
        "/security/scram-users/action",
        {"user": "mallory", "mechanism": "SCRAM-SHA-256", "password": "x"},
    )
    assert answer.status_code in (302, 403)
    assert stored_credentials(console.cluster.zk_client(), "mallory") == {}


def test_admin_sets_changes_and_deletes_a_scram_password(console, zk):
    client = console.login(ADMIN)
    assert b'href="/security/scram-users/"' in client.get("/audit/").content  # nav entry
    user = unique("app")
    answer = client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-512", "password": "first-pw", "iterations": "8192"},
        follow=True,
    )
    assert answer.status_code == 200
    page = answer.content.decode()
    assert f"Saved the SCRAM-SHA-512 password of {user}" in page
    assert f'<td>{user}</td><td>SCRAM-SHA-512</td><td class="n">8192</td>' in page
    cred = stored_credentials(zk, user)["SCRAM-SHA-512"]
    assert cred.iterations == 8192
    assert password_works(cred, user, "first-pw")

    assert f'href="?user={user}&amp;mechanism=SCRAM-SHA-512#scram-form"' in page
    prefilled = client.get(f"/security/scram-users/?user={user}&mechanism=SCRAM-SHA-512")
    assert f'name="user" value="{user}"' in prefilled.content.decode()
    assert "<option selected>SCRAM-SHA-512</option>" in prefilled.content.decode()
    client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-512", "password": "second-pw"},
    )
    cred = stored_credentials(zk, user)["SCRAM-SHA-512"]
    assert cred.iterations == 4096
    assert password_works(cred, user, "second-pw")
    assert not password_works(cred, user, "first-pw")

    answer = client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-512", "action": "delete"},
        follow=True,
    )
    assert f"Deleted the SCRAM-SHA-512 credential of {user}" in answer.content.decode()
    assert stored_credentials(zk, user) == {}
    answer = client.post(
        "/security/scram-users/action",
        {"user": user, "mechanism": "SCRAM-SHA-512", "action": "delete"},
    )
    assert answer.status_code == 404
    assert f"{user} has no SCRAM-SHA-512 credential." in answer.content.decode()

    entries = AuditEntry.objects.filter(target=f"scram-user:{user}").order_by("id")
    assert [(e.action, e.ok) for e in entries] == [
        ("scram.set", True),
        ("scram.set", True),
        ("scram.delete", True),
        ("scram.delete", False),
    ]
    assert entries[0].before is None
    assert entries[0].after == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert entries[1].before == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    assert entries[2].after is None
    assert "first-pw" not in _audit_text() and "second-pw" not in _audit_text()


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"mechanism": "SCRAM-SHA-1"}, "mechanism", "Mechanism must be one of"),
        ({"iterations": "100"}, "iterations", "Iterations must be between 4,096 and 16,384"),
        ({"iterations": "lots"}, "iterations", "Iterations must be a whole number"),
        ({"password": ""}, "password", "The password must not be empty."),
        ({"password": "x"}, "password", "at least 8 characters long (this one has 1)"),
        ({"user": "  "}, "user", "A SCRAM user needs a name."),
        ({"user": "bad\x00name"}, "user", "must not contain control characters"),
    ],
)
def test_bad_scram_input_names_the_field_and_changes_nothing(console, zk, form, field, message):
    client = console.login(ADMIN)
    user = unique("bad")
    body = {"user": user, "mechanism": "SCRAM-SHA-256", "password": "password-1", **form}
    answer = client.post("/security/scram-users/action", body)
    assert answer.status_code == 400
    assert message in answer.content.decode()
    api = client.post(
        "/api/security/scram-users",
        data=json.dumps({**body, "iterations": body.get("iterations", 4096)}),
        content_type="application/json",
    )
    assert api.status_code == 400
    assert message in api.json()["detail"] or field in api.json()["errors"]
    assert stored_credentials(zk, user) == {}
    assert not AuditEntry.objects.filter(target=f"scram-user:{user}").exists()


def test_the_api_lists_sets_and_deletes_credentials(console, zk):
    client = console.login(ADMIN)
    user = unique("api")
    made = client.post(
        "/api/security/scram-users",
        data=json.dumps({"user": user, "mechanism": "SCRAM-SHA-256", "password": "api-password"}),
        content_type="application/json",
    )
    assert made.status_code == 200, made.content
    assert made.json() == {
        "user": user,
        "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096}],
    }
    listed = client.get("/api/security/scram-users").json()
    assert {"user": user, "credentials": made.json()["credentials"]} in listed
    assert "api-password" not in json.dumps(listed)
    assert password_works(stored_credentials(zk, user)["SCRAM-SHA-256"], user, "api-password")
    gone = client.delete(f"/api/security/scram-users?user={user}&mechanism=SCRAM-SHA-256")
    assert gone.status_code == 204
    assert stored_credentials(zk, user) == {}
    again = client.delete(f"/api/security/scram-users?user={user}&mechanism=SCRAM-SHA-256")
    assert again.status_code == 404 and again.json()["detail"]
    audit = AuditEntry.objects.filter(target=f"scram-user:{user}").values_list("source", flat=True)
    assert set(audit) == {"api"}


@pytest.mark.parametrize(
    ("acl", "field"),
    [
        ({"principal": "alice"}, "principal"),
        ({"operation": "FLY"}, "operation"),
        ({"resource_type": "USER"}, "resource_type"),
        ({"resource_type": "CLUSTER", "resource_name": "other"}, "resource_name"),
        ({"resource_name": ""}, "resource_name"),
        ({"pattern_type": "MATCH"}, "pattern_type"),
        ({"permission": "MAYBE"}, "permission"),
    ],
)
def test_bad_acls_are_refused_before_anything_is_sent(console, acl, field):
    client = console.login(ADMIN)
    body = {
        "resource_type": "TOPIC",
        "resource_name": unique("topic"),
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
        **acl,
    }
    answer = client.post(
        "/api/security/acls", data=json.dumps(body), content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["errors"]
    page = client.post("/security/acls/action", {**body, "action": "add"})
    assert page.status_code == 400
    assert not AuditEntry.objects.filter(action="acl.add").exists()


def test_admin_adds_lists_and_removes_acls(console, zk):
    client = console.login(ADMIN)
    topic, prefix = unique("orders"), unique("team")
    acl = {
        "resource_type": "TOPIC",
        "resource_name": topic,
        "pattern_type": "LITERAL",
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    }
    answer = client.post("/security/acls/action", {**acl, "action": "add"}, follow=True)
    assert "Added the ACL." in answer.content.decode()
    data, _ = zk.get(f"/kafka-acl/Topic/{topic}")
    assert json.loads(data)["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
    deny = {
        **acl,
        "resource_type": "GROUP",
        "resource_name": prefix,
        "pattern_type": "PREFIXED",
        "operation": "ALL",
        "permission": "DENY",
    }
    made = client.post("/api/security/acls", data=json.dumps(deny), content_type="application/json")
    assert made.status_code == 200 and made.json() == deny

    page = client.get(f"/security/acls/?principal=User:alice&resource_name={topic}").content
    assert f'<td class="mono">{topic}</td>'.encode() in page
    assert prefix.encode() not in page
    groups = client.get("/api/security/acls?resource_type=GROUP&principal=User:alice").json()
    assert deny in groups and acl not in groups
    assert deny not in client.get("/api/security/acls?permission=ALLOW").json()

    answer = client.post("/security/acls/action", {**acl, "action": "remove"}, follow=True)
    assert "Removed the ACL." in answer.content.decode()
    assert acl not in client.get("/api/security/acls").json()
    again = client.post("/security/acls/action", {**acl, "action": "remove"})
    assert again.status_code == 404 and "No such ACL." in again.content.decode()
    gone = client.delete("/api/security/acls?" + urlencode(deny))
    assert gone.status_code == 200 and gone.json() == [deny]
    assert client.get("/api/security/acls").json() == []

    audit = AuditEntry.objects.filter(action__startswith="acl.").order_by("id")
    assert [(e.action, e.source, e.ok) for e in audit] == [
        ("acl.add", "ui", True),
        ("acl.add", "api", True),
        ("acl.remove", "ui", True),
        ("acl.remove", "ui", False),
        ("acl.remove", "api", True),
    ]
    assert audit[0].after == acl and audit[2].before == [acl]
