"""Issue 25, the console side, against a real broker, ZooKeeper and Redis: each attack an
attacker made on `make up SECURE=1` is refused now.

- the state dir is 0700, the database and state files 0600;
- SCRAM salt/stored_key/server_key never leave the brokers (quota answers, audit, events);
- lag series and live deltas are data, never markup (json_script, no inline script);
- any group id (/ ? # % space unicode) lists, routes and renders;
- alert webhooks: http(s) to public addresses only (loopback in every spelling refused
  with a sentence, 400), one bad rule never stops the others, delivery detail for admins;
- failed logins, 403s and /admin/ changes are audited; logins are rate limited (429);
- a Content-Security-Policy on every page."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import quote

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from console.models import AuditEntry
from console.roles import ADMIN, OPERATOR, VIEWER
from quill_stack.services import PROJECT_ROOT
from quill_stack.state import StackLock, status_path, write_status
from tests.console_helpers import ODD_GROUPS

pytest_plugins = ["tests.console_helpers"]
pytestmark = pytest.mark.cluster

SECRET_FIELDS = ("salt=", "stored_key", "server_key")


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---------------------------------------------------------------- state files


def test_state_dir_database_and_secret_key_are_private(tmp_path):
    state = tmp_path / "state"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"}
    env["QUILL_STATE_DIR"] = str(state)
    env.pop("QUILL_SECRET_KEY", None)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=PROJECT_ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert _mode(state) == 0o700
    assert _mode(state / "console.sqlite3") == 0o600
    assert _mode(state / "secret_key") == 0o600


def test_supervisor_pid_and_status_files_are_private(tmp_path):
    state = tmp_path / "stack"
    state.mkdir(mode=0o755)
    lock = StackLock(state)
    lock.acquire()
    try:
        write_status(state, {"children": []})
        assert _mode(state) == 0o700
        assert _mode(lock.path) == 0o600
        assert _mode(status_path(state)) == 0o600
    finally:
        lock.release()


# ---------------------------------------------------------------- SCRAM material


@pytest.fixture(scope="module")
def admin_client(console_cluster):
    return AdminClient({"bootstrap.servers": console_cluster.bootstrap})


def _scram_user(admin_client, name: str) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion(name, info, b"bob-secret")
    for future in admin_client.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def test_quota_answers_and_audit_show_no_scram_material(console, admin_client):
    from tests.console_helpers import unique

    user = unique("bob")
    _scram_user(admin_client, user)
    operator, viewer = console.login(OPERATOR), console.login(VIEWER)
    body = {"user": user, "quotas": {"producer_byte_rate": 1024}}
    response = operator.put("/api/quotas", body, content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["quotas"] == {"producer_byte_rate": "1024"}
    listed = viewer.get("/api/quotas").content.decode()
    audit = viewer.get(f"/api/audit?target={user}").content.decode()
    page = viewer.get("/audit/").content.decode()
    for text in (response.content.decode(), listed, audit, page):
        assert not any(f in text for f in SECRET_FIELDS), text[:2000]
    entry = AuditEntry.objects.get(action="quota.set", target=f"quota:users/{user}")
    assert entry.after == {"SCRAM-SHA-512": "iterations=4096", "producer_byte_rate": "1024"}
    # the credential itself is untouched in ZooKeeper
    zk = console.cluster.zk_client()
    stored = json.loads(zk.get(f"/config/users/{user}")[0])["config"]
    assert stored["SCRAM-SHA-512"].startswith("salt=")
    assert stored["producer_byte_rate"] == "1024"


def test_the_event_feed_shows_mechanisms_and_iterations_only(console):
    from console.monitor import deltas
    from livefeed import history

    stored = "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    change = {"kind": "config_change", "ts": 1, "entity": "users/bob"}
    events, _ = deltas.for_change({**change, "config": {"SCRAM-SHA-512": stored}}, set())
    assert events[0]["text"] == "config of users/bob: SCRAM-SHA-512=iterations=8192"
    # an event the monitor kept before the fix is cut when read
    old = {"ts": 2, "kind": "config_change", "text": f"config of users/bob: SCRAM-SHA-512={stored}"}
    history.add_event(old)
    assert history.events(1)[0]["text"] == "config of users/bob: SCRAM-SHA-512=iterations=8192"
    html = console.login(VIEWER).get("/").content.decode()
    assert "SCRAM-SHA-512=iterations=8192" in html and "stored_key" not in html


# ---------------------------------------------------------------- odd group ids


@pytest.fixture(scope="module")
def odd_groups(console_cluster):
    """Groups with committed offsets whose ids hold / ? # % space and unicode."""
    from tests.console_helpers import commit_group_offsets

    return commit_group_offsets(console_cluster.bootstrap, ODD_GROUPS)


def test_any_group_id_lists_routes_and_renders(console, odd_groups):
    from django.urls import reverse

    viewer = console.login(VIEWER)
    listing = viewer.get("/groups/")
    assert listing.status_code == 200, listing.content[:500]
    html = listing.content.decode()
    for group in ODD_GROUPS:
        url = reverse("group", args=[group])
        assert f'href="{url}"' in html
        detail = viewer.get(url)
        assert detail.status_code == 200, (group, detail.status_code)
        assert detail.context["group_id"] == group
        assert [r["committed"] for r in detail.context["group"]["partitions"]] == [3]
        api = viewer.get(f"/api/groups/{quote(group, safe='/')}")
        if not group.endswith("/reset"):
            assert api.status_code == 200 and api.json()["group_id"] == group, group
        lag = viewer.get(f"/api/groups/{quote(group, safe='/')}/lag")
        assert lag.status_code == 200 and lag.json() == []


def test_a_forged_lag_series_stays_data(console, odd_groups):
    from livefeed import history

    group = ODD_GROUPS[0]
    payload = "</script><script>window.pwned=1</script><img src=x onerror=alert(1)>"
    history.client().lpush(history.lag_key(group), json.dumps([time.time(), payload, 0]))
    html = console.login(VIEWER).get(f"/groups/{group}/").content.decode()
    assert "<script>window.pwned" not in html and "<img src=x" not in html
    assert "\\u003C/script\\u003E" in html  # json_script's escaping
    inline = re.findall(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", html)
    assert inline == [], inline  # no inline script: the CSP allows /static/ only
    assert "onsubmit=" not in html and "onclick=" not in html


# ---------------------------------------------------------------- webhooks


LOOPBACK_SPELLINGS = (
    "http://127.0.0.1:6379/",
    "http://[::1]:6379/",
    "http://0177.0.0.1:6379/",
    "http://2130706433:6379/",
    "http://[::ffff:127.0.0.1]:6379/",
    "http://localhost:2181/",
    "http://0.0.0.0:9092/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
)
MALFORMED = (
    "http://a b/",
    "ftp://example.com/",
    "http://x:99999/",
    "http:///nohost",
    "gopher://x/",
)


@pytest.mark.parametrize("url", LOOPBACK_SPELLINGS + MALFORMED)
def test_webhooks_to_internal_or_malformed_urls_are_refused(console, url):
    body = {"group": "g", "statuses": ["ERR"], "webhook_url": url}
    response = console.login(OPERATOR).post("/api/alerts", body, content_type="application/json")
    assert response.status_code == 400, (url, response.status_code, response.content)
    assert "webhook_url" in response.json()["errors"]
    assert response.json()["detail"].endswith(".")
    from alerts.models import AlertRule

    assert not AlertRule.objects.filter(webhook_url=url).exists()


def test_an_admin_allow_list_names_internal_networks(console, settings):
    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    body = {"group": "g", "statuses": ["ERR"], "webhook_url": "http://127.0.0.1:8080/hook"}
    response = console.login(OPERATOR).post("/api/alerts", body, content_type="application/json")
    assert response.status_code == 201, response.content
    body["webhook_url"] = "http://[::1]:8080/hook"  # only what the list names
    response = console.login(OPERATOR).post("/api/alerts", body, content_type="application/json")
    assert response.status_code == 400


@pytest.fixture
def hook():
    received: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(302)  # a redirect the worker must not follow
            self.send_header("Location", "http://127.0.0.1:1/elsewhere")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()


def test_one_bad_rule_never_stops_the_others(console, settings, odd_groups, hook):
    """A rule saved before the checks (a space in its URL, a loopback port) fails its own
    delivery; the rule after it in the run still fires and delivers. Viewers see
    delivered/failed, admins the detail."""
    from alerts import tasks as alerts
    from alerts.models import AlertEvent, AlertRule
    from livefeed import history

    url, received = hook
    group = ODD_GROUPS[4]
    now = time.time()
    status = {"status": "ERR", "at": now, "lag": 2, "lag_ms": 5, "partitions": {}}
    history.client().set(history.group_key(group), json.dumps(status))
    AlertRule.objects.all().delete()
    bad = AlertRule.objects.create(name="a-bad", group=group, statuses=["ERR"])
    AlertRule.objects.filter(id=bad.id).update(webhook_url="http://a b/")
    AlertRule.objects.create(
        name="b-internal", group=group, statuses=["ERR"], webhook_url="http://127.0.0.1:1/"
    )
    AlertRule.objects.create(name="c-good", group=group, statuses=["ERR"], webhook_url=url)
    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the test's hook is local

    assert alerts.evaluate() == 3
    delivered = {e.rule.name: e.delivered for e in AlertEvent.objects.filter(group_id=group)}
    assert delivered["a-bad"]["webhook"].startswith("failed: ")
    assert delivered["b-internal"]["webhook"].startswith("failed: ")
    assert delivered["c-good"] == {"webhook": "HTTP 302"}  # not followed
    assert [r["group"] for r in received] == [group]

    settings.QUILL_WEBHOOK_ALLOWED_NETWORKS = []
    assert alerts.deliver_webhook("http://127.0.0.1:1/", b"{}").startswith("failed: refused: ")

    viewer = console.login(VIEWER).get(f"/api/alerts/events?group={quote(group)}").json()
    assert {e["delivered"]["webhook"] for e in viewer} == {"failed"}
    text = json.dumps(viewer) + console.login(VIEWER).get(f"/groups/{group}/").content.decode()
    assert "refused" not in text and "HTTP 302" not in text and "127.0.0.1:1" not in text
    admin = console.login(ADMIN).get(f"/api/alerts/events?group={quote(group)}").json()
    assert "HTTP 302" in {e["delivered"]["webhook"] for e in admin}


# ---------------------------------------------------------------- logins, 403s, admin


def test_failed_logins_are_audited_and_rate_limited(console, settings):
    from django.test import Client

    settings.AXES_FAILURE_LIMIT = 5
    user = console.user(VIEWER)
    client = Client()
    for _ in range(5):
        wrong = {"username": user.username, "password": "not-it"}
        assert client.post("/accounts/login/", wrong).status_code in (200, 429)
    failed = AuditEntry.objects.filter(action="login.failed", target=f"login:{user.username}")
    assert failed.count() == 5 and not any(e.ok for e in failed)
    assert "not-it" not in json.dumps(list(failed.values("detail", "target", "after")))
    right = client.post("/accounts/login/", {"username": user.username, "password": "pw"})
    assert right.status_code == 429
    assert b"too many" in right.content.lower() or b"locked" in right.content.lower()
    assert "_auth_user_id" not in client.session
    # another user from the same address is not locked out
    other = console.user(VIEWER)
    ok = Client().post("/accounts/login/", {"username": other.username, "password": "pw"})
    assert ok.status_code == 302


def test_denials_are_audited(console):
    viewer = console.login(VIEWER)
    response = viewer.post("/api/topics", {"name": "nope"}, content_type="application/json")
    assert response.status_code == 403
    assert viewer.get("/users/").status_code == 403
    denied = set(AuditEntry.objects.filter(action="denied").values_list("target", flat=True))
    assert {"POST /api/topics", "GET /users/"} <= denied


def test_users_made_in_django_admin_are_audited(console):
    from django.contrib.auth import get_user_model

    from tests.console_helpers import unique

    boss = get_user_model().objects.create_superuser(unique("boss"), password="pw")
    client = console.login("anonymous")
    client.force_login(boss)
    name = unique("sneaky")
    form = {"username": name, "password1": "Long-enough-9", "password2": "Long-enough-9"}
    form["usable_password"] = "true"
    response = client.post("/admin/auth/user/add/", form)
    assert response.status_code == 302, response.content[:2000]
    entry = AuditEntry.objects.get(action="admin.user.add")
    assert entry.username == boss.username and entry.target == f"user:{name}"


def test_pages_carry_a_content_security_policy(console):
    response = console.login(VIEWER).get("/")
    policy = dict(
        d.strip().split(" ", 1) for d in response.headers["Content-Security-Policy"].split(";")
    )
    assert policy["script-src"] == "'self'" and policy["default-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["object-src"] == "'none'"
    login = console.login("anonymous").get("/accounts/login/")
    assert "Content-Security-Policy" in login.headers
