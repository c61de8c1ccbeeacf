"""The cluster switcher in chromium (issue 29): one console (daphne and its monitor, as
`make run` starts them) in front of two real clusters; the switcher moves between them,
links stay in the chosen cluster, and the live page of b shows b's new topic."""

from __future__ import annotations

import json

import pytest

from tests.console_helpers import OUT, cluster_spec, console_stack, log_in, unique

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers"]  # the chromium `page` fixture


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    a, b = cluster_factory(1), cluster_factory(1)
    state = tmp_path_factory.mktemp("console-clusters")
    listed = json.dumps([cluster_spec("alpha", a), cluster_spec("beta", b)])
    with console_stack(a, redis_server, state, 13, QUILL_CLUSTERS=listed) as (url, password):
        yield {"a": a, "b": b, "url": url, "password": password}


def create_topic(cluster, prefix: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = unique(prefix)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def shot(page, name: str) -> None:
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def test_the_switcher_moves_between_clusters(stack, page):
    url = stack["url"]
    in_a, in_b = create_topic(stack["a"], "alpha"), create_topic(stack["b"], "beta")
    log_in(page, url, stack["password"])
    page.goto(f"{url}/topics/")
    for _ in range(60):  # both monitors up: both dots green
        if page.locator('#cluster-switcher .health[data-health="ok"]').count() == 3:
            break
        page.wait_for_timeout(500)
        page.reload()
    assert page.locator("#cluster-switcher summary").inner_text().strip() == "alpha"
    assert page.locator(f'a[href="/topics/{in_a}/"]').count() == 1
    assert page.locator(f"text={in_b}").count() == 0
    page.click("#cluster-switcher summary")
    shot(page, "clusters-switcher-open")
    page.click('#cluster-switcher a[data-cluster="beta"]')
    page.wait_for_url(f"{url}/c/beta/topics/")
    assert page.locator("#cluster-switcher summary").inner_text().strip() == "beta"
    assert page.locator(f'a[href="/c/beta/topics/{in_b}/"]').count() == 1
    assert page.locator(f"text={in_a}").count() == 0
    page.wait_for_selector('#livedot[data-state="live"]')
    # a topic made in beta appears on beta's live page; one made in alpha does not
    later_a, later_b = create_topic(stack["a"], "alpha"), create_topic(stack["b"], "beta")
    page.wait_for_selector(f'a[href="/c/beta/topics/{later_b}/"]')
    assert page.locator(f"text={later_a}").count() == 0
    shot(page, "clusters-beta-topics")
    # the nav's links stay in beta; the old URLs are alpha's
    page.click("header.bar nav >> text=Consumer groups")
    page.wait_for_url(f"{url}/c/beta/groups/")
    page.goto(f"{url}/c/beta/")
    shot(page, "clusters-beta-home")
    assert page.locator("#cluster-switcher summary").inner_text().strip() == "beta"
    response = page.goto(f"{url}/c/gamma/topics/")
    assert response.status == 404
