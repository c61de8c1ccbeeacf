"""Issue 25 in Debian's chromium (Playwright), against the console as the secure stack
runs it: daphne on a TLS endpoint with a certificate from the stack's CA
(quill_stack.secure.console_cert), a real broker, ZooKeeper and Redis.

- HTTPS only: plain HTTP gets no page; cookies are Secure, HSTS and a CSP are sent;
- a forged live delta (`h`: markup, `s`: badges) never becomes markup, a forged lag
  series never leaves its JSON, no page trips the CSP (no inline script or handler);
- groups whose ids hold / ? # % space or unicode list and open.
Screenshots go to test-output/console/hardening-*.png."""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

from quill_stack import ports, secure, services
from quill_stack.process import ManagedProcess
from quill_stack.services import PROJECT_ROOT
from quill_stack.state import owner_env

pytestmark = [pytest.mark.browser, pytest.mark.slow]
OUT = PROJECT_ROOT / "test-output" / "console"
FORGED = '<img src=x onerror="window.pwned=1">'


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    from tests.console_helpers import CHROMIUM, ODD_GROUPS, commit_group_offsets, seed_console_db

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run `make install` (apt-get install chromium)")
    cluster = cluster_factory(1)
    state = tmp_path_factory.mktemp("console-tls")
    redis_url = f"redis://{redis_server.host}:{redis_server.port}/7"
    redis.Redis.from_url(redis_url).flushdb()
    settings = services.app_env(state, redis_url, cluster.zk_connect, cluster.bootstrap)
    pem, ca = secure.console_cert(state, "127.0.0.1"), secure.ca_path(state)
    port = ports.free_port()
    spec = services.console_spec(state, settings, port, "127.0.0.1", pem, ca)
    password = seed_console_db(state)
    console = ManagedProcess(spec, owner_env(state))
    console.start()
    try:
        console.wait_healthy()
        commit_group_offsets(cluster.bootstrap, ODD_GROUPS)
        forged = json.dumps([time.time(), f"</script><script>window.pwned=2</script>{FORGED}", 0])
        redis.Redis.from_url(redis_url).lpush(f"quill:lag:{ODD_GROUPS[0]}", forged)
        yield {
            "url": f"https://127.0.0.1:{port}",
            "port": port,
            "ca": ca,
            "password": password,
            "groups": ODD_GROUPS,
        }
    finally:
        console.kill()  # thrown away with its state dir (see console_helpers.discard)


@pytest.fixture(scope="module")
def page(stack):
    from playwright.sync_api import sync_playwright

    from tests.console_helpers import CHROMIUM, CHROMIUM_ARGS, WAIT_MS

    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(
            ignore_https_errors=True,  # the stack's own CA, not in chromium's store
            viewport={"width": 1440, "height": 900},
        )
        pg = context.new_page()
        pg.set_default_timeout(WAIT_MS)
        pg.csp_errors = []
        pg.on(
            "console",
            lambda m: "Content Security Policy" in m.text and pg.csp_errors.append(m.text),
        )
        pg.goto(f"{stack['url']}/accounts/login/")
        pg.fill("input[name=username]", "admin")
        pg.fill("input[name=password]", stack["password"])
        pg.click("button[type=submit]")
        pg.wait_for_url(f"{stack['url']}/")
        yield pg
        browser.close()


def test_the_console_speaks_https_only_with_hsts_and_secure_cookies(stack, page):
    context = ssl.create_default_context(cafile=str(stack["ca"]))
    with urllib.request.urlopen(f"{stack['url']}/accounts/login/", context=context) as r:
        assert r.status == 200
        assert r.headers["Strict-Transport-Security"].startswith("max-age=31536000")
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        assert "; secure" in r.headers["Set-Cookie"].lower()  # the CSRF cookie
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["sessionid"]["secure"] and cookies["sessionid"]["httpOnly"]
    assert cookies["csrftoken"]["secure"]
    with socket.create_connection(("127.0.0.1", stack["port"]), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.settimeout(10)
        try:
            answer = sock.recv(4096)
        except (ConnectionResetError, TimeoutError):
            answer = b""
    assert b"HTTP/1.1 200" not in answer  # no page over plain HTTP


def test_a_forged_live_delta_is_text_never_markup(stack, page):
    page.goto(f"{stack['url']}/")
    page.wait_for_selector('[data-k="b:1:ctl"]')
    result = page.evaluate(
        """(forged) => {
            window.quill.reindex();
            window.quill.patch("b:1:ctl", {h: forged});
            window.quill.patch("c:controller", {s: [[forged, "pill muted"]]});
            return {
                imgs: document.querySelectorAll("main img").length,
                ctl: document.querySelector('[data-k="c:controller"]').textContent,
            };
        }""",
        FORGED,
    )
    page.wait_for_timeout(500)  # an onerror would have run by now
    assert result == {"imgs": 0, "ctl": FORGED}
    assert page.evaluate("window.pwned") is None
    page.screenshot(path=str(OUT / "hardening-cluster.png"), full_page=True)
    assert page.csp_errors == []


def test_odd_group_ids_list_and_open_and_a_forged_series_stays_data(stack, page):
    page.goto(f"{stack['url']}/groups/")
    links = page.locator("#groups tbody td:first-child a")
    names = links.all_text_contents()
    assert sorted(names) == sorted(stack["groups"])
    page.screenshot(path=str(OUT / "hardening-groups.png"), full_page=True)
    for group in stack["groups"]:
        page.goto(f"{stack['url']}/groups/")
        page.locator("#groups tbody td:first-child a", has_text=group).first.click()
        page.wait_for_selector("#group-partitions")
        heading = page.locator("h1").text_content()
        assert group in heading, (group, heading)
        assert page.url.endswith(quote(group, safe="/") + "/")
    page.goto(f"{stack['url']}/groups/{stack['groups'][0]}/")
    page.wait_for_selector("svg.chart")
    page.wait_for_timeout(500)
    assert page.evaluate("window.pwned") is None
    assert page.locator("main img").count() == 0
    series = page.evaluate("JSON.parse(document.getElementById('lag-series').textContent)")
    assert series[0][1].startswith("</script><script>")  # data, shown as data
    page.screenshot(path=str(OUT / "hardening-group.png"), full_page=True)
    assert page.csp_errors == []


def test_the_api_docs_and_django_admin_work_under_the_csp(stack, page):
    page.goto(f"{stack['url']}/api/docs")
    page.wait_for_selector(".swagger-ui .opblock", timeout=60_000)
    page.screenshot(path=str(OUT / "hardening-api-docs.png"))
    page.goto(f"{stack['url']}/admin/auth/user/add/")
    page.wait_for_selector("input[name=username]")
    page.screenshot(path=str(OUT / "hardening-admin.png"))
    assert page.csp_errors == []
