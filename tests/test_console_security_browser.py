"""The security pages in Debian's chromium (Playwright) against real processes: a broker
with Kafka's AclAuthorizer, the console under daphne. An admin follows the Security
entry, adds a SCRAM user through the form (the broker's stored credential then proves
the password), adds and removes an ACL. Screenshots go to test-output/console/."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import redis

from quill_stack import services
from quill_stack.process import ManagedProcess
from quill_stack.services import PROJECT_ROOT
from quill_stack.state import owner_env
from tests.scram_helpers import password_works, stored_credentials
from tests.stack_helpers import create_admin

pytestmark = [pytest.mark.browser, pytest.mark.slow]
OUT = PROJECT_ROOT / "test-output" / "console"


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    from tests.console_helpers import CHROMIUM  # imported late: console_helpers is a plugin

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run `make install` (apt-get install chromium)")
    cluster = cluster_factory(
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    )
    state = tmp_path_factory.mktemp("console-security")
    redis_url = f"redis://{redis_server.host}:{redis_server.port}/6"
    redis.Redis.from_url(redis_url).flushdb()
    settings = services.app_env(state, redis_url, cluster.zk_connect, cluster.bootstrap)
    from quill_stack import ports

    port = ports.free_port()
    console = ManagedProcess(services.console_spec(state, settings, port), owner_env(state))
    console.start()
    try:
        console.wait_healthy()
        password = create_admin(state)
        yield {"cluster": cluster, "url": f"http://127.0.0.1:{port}", "password": password}
    finally:
        console.stop()


@pytest.fixture(scope="module")
def page(stack):
    from tests.console_helpers import chromium_page

    with chromium_page(OUT) as pg:
        yield pg


def test_admin_manages_scram_users_and_acls_in_the_browser(stack, page):
    url = stack["url"]
    page.goto(f"{url}/security/scram-users/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", stack["password"])
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/security/scram-users/")
    assert page.locator("nav a.on").text_content() == "Security"

    user = f"svc-{uuid.uuid4().hex[:6]}"
    page.fill("#scram-form input[name=user]", user)
    page.select_option("#scram-form select[name=mechanism]", "SCRAM-SHA-256")
    page.fill("#scram-form input[name=password]", "browser-secret")
    page.fill("#scram-form input[name=iterations]", "8192")
    page.click("#scram-form button[type=submit]")
    row = page.locator("#scram-users tbody tr", has_text=user)
    row.wait_for()
    assert [c.strip() for c in row.locator("td").all_text_contents()[:3]] == [
        user,
        "SCRAM-SHA-256",
        "8192",
    ]
    assert "browser-secret" not in page.content()
    page.screenshot(path=str(OUT / "security-scram-users.png"), full_page=True)
    cred = stored_credentials(stack["cluster"].zk_client(), user)["SCRAM-SHA-256"]
    assert password_works(cred, user, "browser-secret")

    page.click("a:has-text('ACLs')")
    page.wait_for_url(f"{url}/security/acls/")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    page.fill("#acl-form input[name=principal]", f"User:{user}")
    page.select_option("#acl-form select[name=operation]", "WRITE")
    page.select_option("#acl-form select[name=resource_type]", "TOPIC")
    page.fill("#acl-form input[name=resource_name]", topic)
    page.select_option("#acl-form select[name=pattern_type]", "PREFIXED")
    page.click("#acl-form button[type=submit]")
    acl_row = page.locator("#acls tbody tr", has_text=topic)
    acl_row.wait_for()
    cells = [c.strip() for c in acl_row.locator("td").all_text_contents()[:7]]
    assert cells == ["TOPIC", topic, "PREFIXED", f"User:{user}", "*", "WRITE", "ALLOW"]
    page.screenshot(path=str(OUT / "security-acls.png"), full_page=True)
    page.once("dialog", lambda dialog: dialog.accept())  # "Remove the ACL ...?"
    acl_row.locator("button:has-text('remove')").click()
    page.locator(".messages li", has_text="Removed the ACL.").wait_for()
    assert page.locator("#acls tbody tr", has_text=topic).count() == 0
