"""The console on big topics (issue 29), through Django's test client against three
real brokers: the topic page puts problem partitions first (offline, under min ISR,
under-replicated, not on the preferred leader) and pages them, configs read in units
with the raw value on hover; broker configs (KIP-226) are previewed as a diff, checked
by the brokers, applied, read back through DescribeConfigs and audited; the header's
search finds topics, groups and brokers; from QUILL_WATCH_FROM_PARTITIONS partitions
the pages read the cluster from watches, and agree with fresh reads."""

from __future__ import annotations

import html
import re

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.console_helpers import point_console_at, unique
from tests.ops_helpers import state
from tests.wait_helpers import wait_until

pytest_plugins = ["tests.console_helpers"]

WIDE = 100  # partitions; replicas [p % 3 + 1, (p + 1) % 3 + 1]


@pytest.fixture(scope="module")
def scale_cluster(cluster_factory):
    return cluster_factory(
        3, **{"zookeeper.session.timeout.ms": "3000", "auto.leader.rebalance.enable": "false"}
    )


@pytest.fixture(scope="module")
def wide(scale_cluster):
    """A 100-partition RF 2 topic (7-day retention, 1 GiB segments) spread over brokers
    1-3, every replica in sync."""
    topic = unique("wide")
    admin = AdminClient({"bootstrap.servers": scale_cluster.bootstrap})
    replicas = [[p % 3 + 1, (p + 1) % 3 + 1] for p in range(WIDE)]
    config = {"retention.ms": "604800000", "segment.bytes": "1073741824"}
    new = NewTopic(topic, num_partitions=WIDE, replica_assignment=replicas, config=config)
    admin.create_topics([new])[topic].result(60)
    wait_until(lambda: all(len(state(scale_cluster, topic, p)["isr"]) == 2 for p in range(WIDE)))
    return topic


@pytest.fixture
def console(settings, scale_cluster, redis_server, db):
    from cluster_client import zk

    point_console_at(settings, scale_cluster, redis_server)
    yield settings
    zk.reset()


def login(role: str = "admin"):
    from tests.console_helpers import make_login

    return make_login(role)


def shown(page: bytes) -> list[int]:
    """The partition numbers of the table's rows, in order."""
    body = page.decode()
    table = body[body.index('id="partitions"') :]
    table = table[: table.index("</table>")]
    return [int(n) for n in re.findall(r'<tr(?: class="problem")?><td class="n">(\d+)</td>', table)]


def row_of(page: bytes, partition: int) -> str:
    body = page.decode()
    start = body.index(f'<td class="n">{partition}</td>')
    return body[start : body.index("</tr>", start)]


# ------------------------------------------------------------------ units


@pytest.mark.parametrize(
    "name, raw, words",
    [
        ("retention.ms", "604800000", "7 days"),
        ("retention.ms", "-1", "unlimited"),
        ("retention.bytes", "-1", "unlimited"),
        ("segment.bytes", "1073741824", "1 GiB"),
        ("max.message.bytes", "1048588", "≈ 1.0 MiB"),
        ("max.compaction.lag.ms", "9223372036854775807", "unlimited"),
        ("flush.messages", "9223372036854775807", "unlimited"),
        ("file.delete.delay.ms", "60000", "1 minute"),
        ("segment.jitter.ms", "0", "0 ms"),
        ("log.retention.hours", "168", "7 days"),
        ("local.retention.ms", "-2", "as retention.ms"),
        ("max.connections", "2147483647", "unlimited"),
        ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", "unlimited"),
        ("leader.replication.throttled.rate", "1048576", "1 MiB/s"),
        ("min.insync.replicas", "2", "2"),
        ("cleanup.policy", "compact,delete", "compact,delete"),
        ("retention.ms", None, "—"),
    ],
)
def test_config_values_in_words(name, raw, words):
    from console.units import config_value

    assert config_value(name, raw) == words


def test_a_leader_off_its_preferred_replica_is_a_live_problem():
    from console.monitor import deltas

    change = {
        "kind": "partition_state",
        "ts": 1,
        "topic": "orders",
        "partition": 0,
        "old": {"leader": 1, "leader_epoch": 3, "isr": [1, 2]},
        "new": {"leader": 2, "leader_epoch": 4, "isr": [1, 2]},
        "replicas": [1, 2],
    }
    _events, out = deltas.for_change(change, live={1, 2})
    cells = out["topic:orders"]["set"]
    assert cells["p:orders:0:state"]["s"] == [["not on preferred leader", "pill warn"]]


# ------------------------------------------------------------------ topic page


def test_configs_in_units_with_raw_value_on_hover(console, wide):
    page = login("viewer").get(f"/topics/{wide}/")
    assert page.status_code == 200
    body = html.unescape(page.content.decode())
    cfg = body[body.index('id="config-table"') :]
    assert re.search(
        r'<dt class="mono">retention.ms</dt><dd class="mono" title="604800000 · topic">7 days</dd>',
        cfg,
    )
    assert re.search(
        r'<dt class="mono">segment.bytes</dt><dd class="mono" title="1073741824 · topic">1 GiB</dd>',
        cfg,
    )
    # Kafka's Long.MAX_VALUE default reads "unlimited"; the raw figure is on hover
    assert re.search(
        r'<dt class="mono">max.compaction.lag.ms</dt><dd class="mono" title="9223372036854775807 · default">unlimited</dd>',
        cfg,
    )
    # near the top: before the partition table
    assert body.index('id="config-table"') < body.index('id="partitions"')


def test_a_healthy_topic_is_paged_in_partition_order(console, wide):
    client = login("viewer")
    first = client.get(f"/topics/{wide}/")
    assert shown(first.content) == list(range(50))
    second = client.get(f"/topics/{wide}/?page=2")
    assert shown(second.content) == list(range(50, 100))
    assert shown(client.get(f"/topics/{wide}/?page=2&per=25").content) == list(range(25, 50))
    # out-of-range and junk page numbers land on a real page
    assert shown(client.get(f"/topics/{wide}/?page=99").content) == list(range(50, 100))
    assert shown(client.get(f"/topics/{wide}/?page=x&per=y").content) == list(range(50))
    # replica rows are folded into their partition's row: one <tr> per partition
    assert first.content.decode().count("<details class='fold'>") == 50
    assert 'class="rp">broker 1: LEO' in first.content.decode()


def test_problem_partitions_come_first(console, scale_cluster, wide):
    lone = unique("lone")
    admin = AdminClient({"bootstrap.servers": scale_cluster.bootstrap})
    # RF 1 under min.insync.replicas 2: every live partition is under min ISR
    config = {"min.insync.replicas": "2"}
    new = NewTopic(lone, num_partitions=3, replica_assignment=[[1], [2], [3]], config=config)
    admin.create_topics([new])[lone].result(60)
    client = login("viewer")
    with_3 = [p for p in range(WIDE) if p % 3 != 0]  # broker 3 is among their replicas
    led_by_3 = [p for p in range(WIDE) if p % 3 == 2]
    scale_cluster.broker(3).stop()
    try:
        wait_until(
            lambda: all(3 not in state(scale_cluster, wide, p)["isr"] for p in with_3),
            what="broker 3 out of every ISR",
        )
        wait_until(lambda: state(scale_cluster, lone, 2)["leader"] == -1, what="lone-2 offline")
        page = client.get(f"/topics/{wide}/")
        assert shown(page.content) == with_3[:50]
        rest = client.get(f"/topics/{wide}/?page=2").content
        assert shown(rest) == with_3[50:] + [p for p in range(WIDE) if p % 3 == 0]
        assert "under-replicated" in row_of(page.content, 1)
        assert "not on preferred leader" not in row_of(page.content, 1)
        assert "not on preferred leader" in row_of(page.content, 2)
        only = client.get(f"/topics/{wide}/?problems=1&per=200")
        assert shown(only.content) == with_3
        on_1 = client.get(f"/topics/{wide}/?broker=1&per=200")
        # replicas on broker 1: [1, 2] (p % 3 == 0) and [3, 1] (2), problems first
        assert shown(on_1.content) == led_by_3 + [p for p in range(WIDE) if p % 3 == 0]
        # offline first, then under min ISR; each says why
        lone_page = client.get(f"/topics/{lone}/")
        assert shown(lone_page.content) == [2, 0, 1]
        assert "offline" in row_of(lone_page.content, 2)
        assert "under min ISR" in row_of(lone_page.content, 0)
    finally:
        scale_cluster.broker(3).start()
    wait_until(
        lambda: all(len(state(scale_cluster, wide, p)["isr"]) == 2 for p in range(WIDE)),
        what="broker 3 back in every ISR",
    )
    # in sync again, but broker 3 leads nothing (no automatic rebalance here)
    page = client.get(f"/topics/{wide}/")
    assert shown(page.content)[: len(led_by_3)] == led_by_3
    assert "under-replicated" not in row_of(page.content, 2)
    assert "not on preferred leader" in row_of(page.content, 2)


# ------------------------------------------------------------------ broker configs


def described(bootstrap: str, broker: str) -> dict:
    """name -> (value, source) from DescribeConfigs of a broker, through librdkafka."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.BROKER, broker)
    entries = admin.describe_configs([res])[res].result(30)
    return {e.name: (e.value, int(e.source)) for e in entries.values()}


DYNAMIC_BROKER, DYNAMIC_DEFAULT = 2, 3  # Kafka's ConfigSource ids


def test_broker_config_edit_round_trip(console, scale_cluster):
    from console.models import AuditEntry

    client = login("admin")
    page = client.get("/brokers/2/configs/")
    assert page.status_code == 200
    body = page.content.decode()
    dynamic = body[body.index('id="broker-configs"') : body.index('id="read-only"')]
    read_only = body[body.index('id="read-only"') :]
    assert "log.cleaner.backoff.ms" in dynamic and "broker.id" not in dynamic
    assert '<dt class="mono">broker.id</dt>' in read_only
    # step 1: the diff, checked by the brokers, nothing applied
    preview = client.post("/brokers/2/configs/change", {"configs": "log.cleaner.backoff.ms=20000"})
    assert preview.status_code == 200
    diff = preview.content.decode()
    diff = diff[
        diff.index('id="config-diff"') : diff.index("</table>", diff.index('id="config-diff"'))
    ]
    assert "log.cleaner.backoff.ms" in diff and "not set" in diff and ">20 seconds<" in diff
    assert described(scale_cluster.bootstrap, "2")["log.cleaner.backoff.ms"][1] != DYNAMIC_BROKER
    # step 2: apply; read back through DescribeConfigs, audited with before and after
    applied = client.post(
        "/brokers/2/configs/change", {"configs": "log.cleaner.backoff.ms=20000", "step": "apply"}
    )
    assert applied.status_code == 302
    assert described(scale_cluster.bootstrap, "2")["log.cleaner.backoff.ms"] == (
        "20000",
        DYNAMIC_BROKER,
    )
    entry = AuditEntry.objects.get(action="broker.configs", target="broker:2")
    assert (entry.ok, entry.before, entry.after) == (True, {}, {"log.cleaner.backoff.ms": "20000"})
    # removing the line returns the key to what the broker inherits
    client.post("/brokers/2/configs/change", {"configs": "", "step": "apply"})
    assert described(scale_cluster.bootstrap, "2")["log.cleaner.backoff.ms"][1] != DYNAMIC_BROKER


def test_cluster_default_config_reaches_every_broker(console, scale_cluster):
    client = login("admin")
    text = "log.retention.ms=86400000"
    preview = client.post("/brokers/default/configs/change", {"configs": text})
    assert preview.status_code == 200 and ">1 day<" in preview.content.decode()
    applied = client.post("/brokers/default/configs/change", {"configs": text, "step": "apply"})
    assert applied.status_code == 302
    try:
        for b in ("1", "2", "3"):
            assert described(scale_cluster.bootstrap, b)["log.retention.ms"] == (
                "86400000",
                DYNAMIC_DEFAULT,
            )
        page = client.get("/brokers/default/configs/").content.decode()
        assert "log.retention.ms=86400000" in page  # the edit box starts from what is set
    finally:
        client.post("/brokers/default/configs/change", {"configs": "", "step": "apply"})
    assert described(scale_cluster.bootstrap, "1")["log.retention.ms"][1] != DYNAMIC_DEFAULT


@pytest.mark.parametrize(
    "text, words",
    [
        ("num.replica.fetchers=abc", "num.replica.fetchers"),
        ("broker.id=7", "read-only"),
        ("log.retention.ms", "not key=value"),
    ],
)
def test_bad_broker_configs_are_refused_and_nothing_is_written(console, scale_cluster, text, words):
    from cluster_client import zk
    from console.models import AuditEntry

    client = login("admin")
    for step in ("preview", "apply"):
        answer = client.post("/brokers/1/configs/change", {"configs": text, "step": step})
        assert answer.status_code == 400, answer.status_code
        assert words in html.unescape(answer.content.decode())
        assert text in html.unescape(answer.content.decode())  # the operator's text is kept
    assert zk.entity_config("brokers/1") == {}
    assert not AuditEntry.objects.filter(
        action="broker.configs", ok=True, target="broker:1"
    ).exists()


def test_only_admins_change_broker_configs(console):
    for role in ("viewer", "operator"):
        client = login(role)
        assert client.get("/brokers/1/configs/").status_code == 200
        answer = client.post(
            "/brokers/1/configs/change", {"configs": "num.replica.fetchers=2", "step": "apply"}
        )
        assert answer.status_code == 403
    from cluster_client import zk

    assert zk.entity_config("brokers/1") == {}


# ------------------------------------------------------------------ search


def test_search_finds_topics_groups_and_brokers(console, scale_cluster, wide):
    client = login("viewer")
    one = client.get("/search/", {"q": wide})
    assert one.status_code == 302 and one["Location"] == f"/topics/{wide}/"
    many = client.get("/search/", {"q": "broker"})
    body = many.content.decode()
    assert many.status_code == 200
    hits = body[
        body.index('id="hits-brokers"') : body.index("</ul>", body.index('id="hits-brokers"'))
    ]
    assert hits.count("<li>") == 3
    assert client.get("/search/", {"q": "no-such-thing-anywhere"}).status_code == 200


# ------------------------------------------------------------------ watched picture


def test_big_clusters_read_from_watches_and_agree_with_fresh_reads(console, scale_cluster, wide):
    from cluster_client import picture, state

    fresh = state.overview()
    assert picture.snapshot() is None  # 100-odd partitions: read afresh
    console.QUILL_WATCH_FROM_PARTITIONS = 1
    state.overview()  # sees enough partitions: starts the watches
    wait_until(lambda: picture.snapshot() is not None, what="the watched picture")
    assert state.overview() == fresh
    scale_cluster.broker(3).stop()
    try:
        wait_until(lambda: state.overview()["under_replicated"] > 0, what="the ISR shrink")
        console.QUILL_WATCH_FROM_PARTITIONS = 10**9
        direct = state.overview()
        console.QUILL_WATCH_FROM_PARTITIONS = 1
        wait_until(lambda: state.overview() == direct, what="the watches to agree")
        assert direct["under_replicated"] >= sum(1 for p in range(WIDE) if p % 3 != 0)
    finally:
        scale_cluster.broker(3).start()


# ------------------------------------------------------------------ in chromium


@pytest.fixture(scope="module")
def served(scale_cluster, redis_server, tmp_path_factory):
    """The console under daphne and the monitor, on the module's cluster."""
    import redis

    from quill_stack import services
    from tests.console_helpers import discard, start_console_and_monitor

    state_dir = tmp_path_factory.mktemp("console-scale")
    redis_url = f"redis://{redis_server.host}:{redis_server.port}/6"
    redis.Redis.from_url(redis_url).flushdb()
    env = services.app_env(state_dir, redis_url, scale_cluster.zk_connect, scale_cluster.bootstrap)
    procs, port, password = start_console_and_monitor(state_dir, env)
    yield {"url": f"http://127.0.0.1:{port}", "password": password}
    discard(procs)


def luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css)[:3])
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


COLOURS = """(sel) => { const el = document.querySelector(sel); if (!el) return null;
  const s = getComputedStyle(el); let b = el, bg = 'rgba(0, 0, 0, 0)';
  while (b && (bg === 'rgba(0, 0, 0, 0)' || bg === 'transparent')) {
    bg = getComputedStyle(b).backgroundColor; b = b.parentElement; }
  return [s.color, bg]; }"""
READABLE = (
    "body",
    "h1 .sub",
    "table.t th",
    "table.t td",
    ".pill.ok",
    "dl.cfg-grid dt",
    "nav.pager a",
)


def _log_in(page, served) -> None:
    """Log the page in as the console's admin."""
    page.goto(f"{served['url']}/accounts/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", served["password"])
    page.click("button[type=submit]")


@pytest.mark.browser
def test_big_topic_page_in_chromium_light_and_dark(served, scale_cluster, wide):
    from tests.console_helpers import OUT, chromium_page

    url = served["url"]
    with chromium_page(OUT) as page:
        _log_in(page, served)
        page.wait_for_selector("#global-search")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            page.goto(f"{url}/topics/{wide}/")
            page.wait_for_selector("#partitions")
            height = page.evaluate("document.documentElement.scrollHeight")
            assert height < 3000, height  # 6,435 px before the partitions were paged
            assert page.locator("#partitions tbody tr").count() == 50
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert (luminance(background) < 0.05) == (scheme == "dark"), background
            for sel in READABLE:
                fg, bg = page.evaluate(COLOURS, sel)
                assert contrast(fg, bg) >= 4.5, (scheme, sel, fg, bg)
            page.click("#partitions details.fold summary >> nth=0")
            assert page.locator("#partitions details.fold .rp").first.is_visible()
            page.hover("#config-table dd >> nth=0")
            page.screenshot(path=str(OUT / f"scale-topic-{scheme}.png"), full_page=True)
            page.goto(f"{url}/")
            page.wait_for_selector("#brokers")
            page.screenshot(path=str(OUT / f"scale-cluster-{scheme}.png"), full_page=True)
        page.emulate_media(color_scheme="light")
        # the header's search box: one hit opens it
        page.fill("#global-search", wide)
        page.press("#global-search", "Enter")
        page.wait_for_url(f"**/topics/{wide}/")
        page.fill("#global-search", "broker")
        page.press("#global-search", "Enter")
        page.wait_for_selector("#hits-brokers")
        assert page.locator("#hits-brokers li a").count() == 3
        page.screenshot(path=str(OUT / "scale-search.png"), full_page=True)


@pytest.mark.browser
def test_broker_config_edit_in_chromium(served, scale_cluster):
    from tests.console_helpers import OUT, chromium_page

    url = served["url"]
    with chromium_page(OUT) as page:
        _log_in(page, served)
        page.goto(f"{url}/brokers/1/")
        page.click("#broker-configs-link")
        page.wait_for_selector("#broker-configs")
        page.fill("#edit-form textarea", "num.replica.fetchers=banana")
        page.click("#edit-form button[type=submit]")
        page.wait_for_selector(".field-error")
        assert page.input_value("#edit-form textarea") == "num.replica.fetchers=banana"
        page.fill("#edit-form textarea", "num.replica.fetchers=2\nlog.cleaner.backoff.ms=30000")
        page.click("#edit-form button[type=submit]")
        page.wait_for_selector("#config-diff")
        assert "30 seconds" in page.inner_text("#config-diff")
        page.screenshot(path=str(OUT / "scale-broker-configs-diff.png"), full_page=True)
        page.click("#apply-form button[type=submit]")
        page.wait_for_selector(".messages li.success")
        assert described(scale_cluster.bootstrap, "1")["num.replica.fetchers"] == (
            "2",
            DYNAMIC_BROKER,
        )
        page.emulate_media(color_scheme="dark")
        page.reload()
        page.screenshot(path=str(OUT / "scale-broker-configs-dark.png"), full_page=True)
        page.fill("#edit-form textarea", "")
        page.click("#edit-form button[type=submit]")
        page.click("#apply-form button[type=submit]")
        page.wait_for_selector(".messages li.success")
    assert described(scale_cluster.bootstrap, "1")["num.replica.fetchers"][1] != DYNAMIC_BROKER
