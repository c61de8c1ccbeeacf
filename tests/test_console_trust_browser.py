"""Issue 29's layout and form items in Debian's chromium against the console under
daphne and the monitor (one broker): nothing clipped or cut, config keys whole, the
ZooKeeper version clean, compaction figures not claimed missing beside the cleaner's,
removals asking first. Screenshots go to test-output/console/ and /tmp/trust-*.png."""

from __future__ import annotations

import re
import shutil

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.console_helpers import OUT, chromium_page, console_stack, log_in
from tests.ops_helpers import unique

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers"]


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    cluster = cluster_factory(1)
    state = tmp_path_factory.mktemp("console-trust")
    with console_stack(cluster, redis_server, state, 7) as (url, password):
        with chromium_page(OUT) as page:
            log_in(page, url, password)
            yield {"cluster": cluster, "url": url, "page": page}


def shot(page, name: str) -> None:
    path = OUT / f"trust-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    shutil.copy(path, f"/tmp/trust-{name}.png")


def compacted_topic(bootstrap: str) -> str:
    topic = unique("compacted")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 2, 1, config=config)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(200):
        producer.produce(topic, b"value-%d" % i, key=b"customer-%08d" % (i % 7))
    assert producer.flush(30) == 0
    return topic


CUT_PLACEHOLDERS = """() => {
  const ctx = document.createElement("canvas").getContext("2d");
  const cut = [];
  for (const el of document.querySelectorAll("input[placeholder], textarea[placeholder]")) {
    if (!el.offsetParent) continue;
    const st = getComputedStyle(el);
    ctx.font = `${st.fontStyle} ${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
    const room = el.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    if (ctx.measureText(el.placeholder).width > room + 0.5) cut.push(el.placeholder);
  }
  return cut;
}"""
CLIPPED_FEEDS = """() => [...document.querySelectorAll(".feed")]
  .filter(el => el.offsetParent && el.scrollWidth > el.clientWidth + 1)
  .map(el => el.textContent.trim().slice(0, 60))"""
WRAPPED_VALUES = """() => [...document.querySelectorAll(".kv dd")].filter(el => el.offsetParent &&
  el.getBoundingClientRect().height > 2.1 * parseFloat(getComputedStyle(el).fontSize)
).map(el => el.textContent.trim())"""
PAGES = {
    "cluster": "/",
    "topics": "/topics/",
    "groups": "/groups/",
    "quotas": "/quotas/",
    "scram": "/security/scram-users/",
    "acls": "/security/acls/",
    "operations": "/operations/",
}


def test_nothing_clipped_cut_or_wrapped_mid_value(stack):
    page, url = stack["page"], stack["url"]
    topic = compacted_topic(stack["cluster"].bootstrap)
    pages = {**PAGES, "topic": f"/topics/{topic}/", "messages": f"/messages/?topic={topic}"}
    for name, path in pages.items():
        page.goto(url + path)
        shot(page, name)
        assert page.evaluate(CUT_PLACEHOLDERS) == [], name
        assert page.evaluate(CLIPPED_FEEDS) == [], name
        assert page.evaluate(WRAPPED_VALUES) == [], name


def test_zookeeper_version_is_the_release_alone(stack):
    page = stack["page"]
    page.goto(stack["url"] + "/")
    version = page.locator("dt:has-text('Version') + dd").inner_text().strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version


def test_deleting_a_scram_credential_asks_first(stack):
    page, url = stack["page"], stack["url"]
    user = unique("ops")
    page.goto(f"{url}/security/scram-users/")
    page.fill("#scram-form input[name=user]", user)
    page.fill("#scram-form input[name=password]", "a-long-secret")
    page.click("#scram-form button[type=submit]")
    row = page.locator("#scram-users tbody tr", has_text=user)
    row.wait_for()
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    row.locator("button:has-text('delete')").click()
    page.wait_for_timeout(500)  # a dismissed confirm submits nothing
    assert asked and f"credential of {user}? Clients logging in with it are refused." in asked[0]
    assert page.locator("#scram-users tbody tr", has_text=user).count() == 1
    page.once("dialog", lambda d: d.accept())
    row.locator("button:has-text('delete')").click()
    page.locator(".messages li", has_text=f"credential of {user}").wait_for()
    assert page.locator("#scram-users tbody tr", has_text=user).count() == 0
