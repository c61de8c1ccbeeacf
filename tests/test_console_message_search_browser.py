"""The message search page in chromium (issue 29): a search across partitions paged
from the browser in bounded steps with progress, Continue past the bound, pretty JSON,
the download links, a bad regex shown beside its field; light and dark screenshots."""

from __future__ import annotations

import json

import pytest

from tests.console_helpers import OUT, console_stack, log_in, unique

pytestmark = [pytest.mark.browser, pytest.mark.slow]
pytest_plugins = ["tests.console_helpers"]  # the chromium `page` fixture


@pytest.fixture(scope="module")
def stack(cluster_factory, redis_server, tmp_path_factory):
    cluster = cluster_factory(1)
    state = tmp_path_factory.mktemp("console-search")
    with console_stack(cluster, redis_server, state, 6) as (url, password):
        yield {"cluster": cluster, "url": url, "password": password}


@pytest.fixture(scope="module")
def topic(stack):
    """4 partitions x 50 JSON records; keys k<p>-<i>; every 10th has a header."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = stack["cluster"].bootstrap
    name = unique("orders")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic exists
    admin.create_topics([NewTopic(name, 4, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for p in range(4):
        for i in range(50):
            headers = [("trace", f"t{p}{i}".encode())] if i % 10 == 0 else None
            value = {"order": i, "partition": p, "status": "late" if i == 42 else "ok"}
            producer.produce(
                name, key=f"k{p}-{i}", value=json.dumps(value), partition=p, headers=headers
            )
    assert producer.flush(30) == 0
    return name


def shot(page, name: str) -> None:
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def rows(page) -> list[tuple[int, int]]:
    cells = page.eval_on_selector_all(
        "#search-results tbody tr[data-offset]",
        "rs => rs.map(r => [+r.dataset.partition, +r.dataset.offset])",
    )
    return [tuple(c) for c in cells]


def test_search_every_partition_from_the_page(stack, topic, page):
    url = stack["url"]
    log_in(page, url, stack["password"])
    page.goto(f"{url}/messages/?topic={topic}")
    page.click("#to-search")
    page.wait_for_url(f"**/messages/search?topic={topic}")
    # without filters the page opens on the newest records of every partition
    assert page.text_content("#search-status") == "Scanned 200 · matched 200 · done"
    found = rows(page)  # merged by timestamp: partition 3 was written last
    assert found[0] == (3, 49) and sorted(found) == [(p, i) for p in range(4) for i in range(50)]

    # value contains "late": one record in each partition, found across all four
    page.fill("input[name=value]", '"late"')
    page.select_option("select[name=format]", "json")
    page.click("#search-run")
    page.wait_for_selector("#search-status:has-text('matched 4 · done')")
    assert sorted(rows(page)) == [(p, 42) for p in range(4)]
    assert '"status": "late"' in page.text_content("#search-results tbody pre.enc-json")
    shot(page, "20-message-search")

    # bounded: 20 records per step and in all, then Continue walks on from the offsets
    page.fill("input[name=value]", "")
    page.fill("input[name=header]", "trace")
    page.fill("input[name=max_scanned]", "40")
    page.select_option("select[name=start]", "oldest")
    page.click("#search-run")
    page.wait_for_selector("#search-continue:visible")
    status = page.text_content("#search-status")
    assert status == (
        "Scanned 40 · matched 4 · stopped on max_scanned; resume at 0:10,1:10,2:10,3:10"
    )
    assert sorted(rows(page)) == [(p, 0) for p in range(4)]
    for n in (20, 30, 40):
        page.click("#search-continue")
        page.wait_for_selector(f"#search-status:has-text('resume at 0:{n},1:{n},2:{n},3:{n}')")
    page.click("#search-continue")
    page.wait_for_selector("#search-status:has-text('done')")
    assert page.text_content("#search-status") == "Scanned 200 · matched 20 · done"
    assert sorted(rows(page)) == [(p, i) for p in range(4) for i in range(0, 50, 10)]
    assert "p0: 50 scanned" in page.text_content("#search-parts")
    href = page.get_attribute("#search-jsonl", "href")
    assert "as=jsonl" in href and "header=trace" in href
    shot(page, "21-message-search-resumed")

    # a bad regex: the API's sentence beside the form, the field marked
    page.fill("input[name=regex]", "(")
    page.click("#search-run")
    page.wait_for_selector("#search-error")
    assert "does not compile" in page.text_content("#search-error")
    assert "err" in page.get_attribute("input[name=regex]", "class")

    page.emulate_media(color_scheme="dark")
    page.fill("input[name=regex]", "")
    page.fill("input[name=header]", "")
    page.fill("input[name=key]", "k3-4")
    page.fill("input[name=max_scanned]", "10000")
    page.select_option("select[name=start]", "newest")
    page.click("#search-run")
    page.wait_for_selector("#search-status:has-text('matched 11 · done')")
    assert sorted(rows(page)) == [(3, 4)] + [(3, i) for i in range(40, 50)]
    shot(page, "22-message-search-dark")
    page.emulate_media(color_scheme="light")
