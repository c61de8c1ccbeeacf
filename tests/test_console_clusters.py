"""Several clusters behind one console (QUILL_CLUSTERS, /c/<name>/... URLs): two real
clusters (one ZooKeeper, two chroots) and the console's Django app in this process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import pytest

from cluster_client.clusters import ClusterConfigError, parse
from tests.console_helpers import cluster_spec, commit_group_offsets, point_console_at, unique
from tests.schema_helpers import AVRO_USER, Registry, avro_bytes, produce, wire

pytest_plugins = ["tests.console_helpers"]

USER = {"name": "ann", "visits": 3}


@pytest.fixture(scope="module")
def second_cluster(cluster_factory):
    return cluster_factory(1)


def point_at_both(settings, a, b, redis_server):
    """The console with clusters "a" (the default: first listed) and "b"; yields (a, b)."""
    from cluster_client import zk

    point_console_at(settings, a, redis_server)
    settings.QUILL_CLUSTERS = parse(json.dumps([cluster_spec("a", a), cluster_spec("b", b)]))
    yield a, b
    zk.reset()


@pytest.fixture
def two(settings, console_cluster, second_cluster, redis_server, db):
    yield from point_at_both(settings, console_cluster, second_cluster, redis_server)


def api(client, method: str, path: str, body=None):
    kwargs = {"content_type": "application/json"}
    if body is not None:
        kwargs["data"] = json.dumps(body)
    return getattr(client, method)(path, **kwargs)


def topic_names(client, prefix: str) -> set[str]:
    r = client.get(f"{prefix}/api/topics")
    assert r.status_code == 200, r.content
    return {t["name"] for t in r.json()}


def make_topic(client, prefix: str, **configs) -> str:
    name = unique("mc")
    body = {"name": name, "partitions": 1, "replication_factor": 1, "configs": configs}
    r = api(client, "post", f"{prefix}/api/topics", body)
    assert r.status_code == 201, r.content
    return name


# ---------------------------------------------------------------- configuration
@pytest.mark.parametrize(
    "raw, says",
    [
        ("[{", "not valid JSON"),
        ("{}", "non-empty JSON list"),
        ('[{"name": "a", "zookeeper.connect": "z:2181"}]', "bootstrap.servers is missing"),
        ('[{"name": "a", "bootstrap.servers": "b:9092"}]', "zookeeper.connect is missing"),
        (
            '[{"name": "a", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1"},'
            ' {"name": "a", "bootstrap.servers": "c:1", "zookeeper.connect": "z:1"}]',
            "'a' is used twice",
        ),
        ('[{"name": "A b", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1"}]', "lowercase"),
        (
            '[{"name": "a", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1", "zk": 1}]',
            "unknown keys ['zk']",
        ),
        ("/nonexistent/clusters.json", "cannot read"),
        (
            '[{"name": "a", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1",'
            ' "schema.registry.url": "ftp://sr:1"}]',
            "schema.registry.url is an http:// or https:// URL",
        ),
        (
            '[{"name": "a", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1",'
            ' "schema.registry.url": "http://sr:1",'
            ' "schema.registry.basic.auth.user.info": "nopassword"}]',
            'basic.auth.user.info is "user:password"',
        ),
        (
            '[{"name": "a", "bootstrap.servers": "b:1", "zookeeper.connect": "z:1",'
            ' "schema.registry.basic.auth.user.info": "u:p"}]',
            "needs schema.registry.url",
        ),
    ],
)
def test_bad_cluster_config_is_refused_with_the_reason(raw, says):
    with pytest.raises(ClusterConfigError) as err:
        parse(raw)
    assert says in str(err.value)


def test_console_refuses_to_start_on_bad_config(tmp_path):
    from quill_stack.services import PROJECT_ROOT

    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(PROJECT_ROOT),
        "QUILL_STATE_DIR": str(tmp_path),
        "QUILL_CLUSTERS": '[{"name": "a", "zookeeper.connect": "127.0.0.1:2181"}]',
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "QUILL_CLUSTERS[0] ('a'): bootstrap.servers is missing" in done.stderr


def test_a_file_names_the_clusters(tmp_path):
    path = tmp_path / "clusters.json"
    path.write_text(
        json.dumps([{"name": "x", "bootstrap.servers": "h:1", "zookeeper.connect": "h:2/c"}])
    )
    got = parse(str(path))
    assert list(got) == ["x"]
    assert (got["x"].bootstrap, got["x"].zookeeper_connect) == ("h:1", "h:2/c")


def test_each_cluster_has_its_own_credentials(tmp_path):
    client = tmp_path / "prod-client.properties"
    client.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.username=alice\nsasl.password=alice-secret\n"
    )
    jaas = tmp_path / "prod-jaas.conf"
    jaas.write_text(
        "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  username="zkprod"\n  password="zkpass";\n};\n'
    )
    prod = {"name": "prod", "bootstrap.servers": "h:1", "zookeeper.connect": "h:2/prod"}
    prod |= {"client.config": str(client), "zookeeper.jaas.config": str(jaas)}
    prod |= {"metrics.ports": {"1": 9500}}
    staging = {"name": "staging", "bootstrap.servers": "h:3", "zookeeper.connect": "h:2/st"}
    got = parse(json.dumps([prod, staging]))
    assert got["prod"].client_security == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    assert got["prod"].zookeeper_credentials.username == "zkprod"
    assert got["prod"].metrics_ports == {1: 9500}
    assert "alice-secret" not in repr(got)  # logs and tracebacks never show it
    assert (got["staging"].client_security, got["staging"].zookeeper_credentials) == ({}, None)
    assert got["staging"].client_properties == {}  # plaintext, not the process's own
    bad = dict(prod, **{"zookeeper.jaas.config": str(client)})
    with pytest.raises(ClusterConfigError, match="JAAS file .* is not valid"):
        parse(json.dumps([bad]))


# ---------------------------------------------------------------- two clusters
def test_each_cluster_lists_its_own_topics(two, console):
    a, b = two
    client = console.login("admin")
    in_a = make_topic(client, "")  # the old URLs mean the default cluster (a)
    in_b = make_topic(client, "/c/b")
    assert in_a in topic_names(client, "") and in_a in topic_names(client, "/c/a")
    assert in_a not in topic_names(client, "/c/b")
    assert in_b in topic_names(client, "/c/b")
    assert in_b not in topic_names(client, "/c/a")
    # the topic created under b is in b's ZooKeeper only
    assert b.zk_client().exists(f"/brokers/topics/{in_b}") is not None
    assert a.zk_client().exists(f"/brokers/topics/{in_b}") is None
    # the pages too, and their links stay in the cluster
    page = client.get("/c/b/topics/")
    assert page.status_code == 200
    html = page.content.decode()
    assert in_b in html and in_a not in html
    assert f'href="/c/b/topics/{in_b}/"' in html


def test_an_unknown_cluster_is_a_404(two, console):
    client = console.login("admin")
    r = client.get("/c/nope/api/topics")
    assert r.status_code == 404
    assert r.json() == {"detail": "No cluster named 'nope' in this console."}
    assert client.get("/c/nope/topics/").status_code == 404
    assert client.get("/c/nope/").status_code == 404


def test_the_switcher_names_every_cluster(two, console):
    client = console.login("viewer")
    html = client.get("/c/b/groups/").content.decode()
    assert 'data-cluster="b"' in html  # the body: the live socket asks for b's updates
    assert 'href="/groups/" data-cluster="a"' in html
    assert 'href="/c/b/groups/" data-cluster="b" class="on"' in html


def test_an_operation_under_b_acts_on_b(two, console):
    from operations import jobs, kinds  # noqa: F401 - kinds registers the runners
    from operations.models import Operation

    client = console.login("admin")
    topic = make_topic(client, "/c/b")
    body = {"kind": "elect-leaders", "topics": [topic]}
    refused = api(client, "post", "/api/operations", body)  # a has no such topic
    assert refused.status_code == 400 and "Unknown topic" in refused.content.decode()
    r = api(client, "post", "/c/b/api/operations", body)
    assert r.status_code == 202, r.content
    op_id = r.json()["id"]
    assert Operation.objects.get(id=op_id).cluster == "b"
    assert op_id in {o["id"] for o in client.get("/c/b/api/operations").json()}
    assert op_id not in {o["id"] for o in client.get("/api/operations").json()}
    assert client.get(f"/api/operations/{op_id}").status_code == 404
    # the worker runs it with no cluster of its own: the record's cluster (b) is used
    assert jobs.run(op_id) == "succeeded"
    op = Operation.objects.get(id=op_id)
    assert op.result == {"elected": [], "not_needed": 1, "failed": []}  # in a: failed


def test_brokers_of_another_cluster_are_not_restarted_from_here(two, console):
    client = console.login("admin")
    r = api(client, "post", "/c/b/api/operations", {"kind": "rolling-restart", "dry_run": True})
    assert r.status_code == 409, r.content
    assert "for the cluster 'a' only" in r.json()["detail"]


def test_alerts_are_per_cluster(two, console, settings):
    import asyncio

    from alerts.models import AlertEvent, AlertRule
    from alerts.tasks import evaluate
    from console.monitor.run import Monitor

    a, b = two
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    client = console.login("operator")
    group = unique("ag")
    commit_group_offsets(b.bootstrap, [group], offset=3)  # lag 2 in b, no such group in a
    rules = {}
    for prefix, name in (("", "a"), ("/c/b", "b")):
        body = {"name": f"lag-{name}", "group": group, "statuses": [], "max_lag_ms": 0}
        body["emails"] = ["ops@example.com"]
        r = api(client, "post", f"{prefix}/api/alerts", body)
        assert r.status_code == 201, r.content
        rules[name] = r.json()["id"]
    assert AlertRule.objects.get(id=rules["b"]).cluster == "b"
    assert [r["id"] for r in client.get("/c/b/api/alerts").json()] == [rules["b"]]
    assert rules["b"] not in [r["id"] for r in client.get("/api/alerts").json()]
    # b's monitor samples b's group (its status under b's Redis keys), then the rules run
    for name in ("a", "b"):
        asyncio.run(Monitor(interval=0.2, cluster=name).run(samples=3))
    assert evaluate() == 1
    fired = list(AlertEvent.objects.all())
    assert [(e.rule_id, e.group_id, e.lag) for e in fired] == [(rules["b"], group, 2)]
    assert [e["rule"] for e in client.get("/c/b/api/alerts/events").json()] == [rules["b"]]
    assert client.get("/api/alerts/events").json() == []


# ---------------------------------------------------------------- schemas, registries, audit
POINT = {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}


def read(client, prefix: str, topic: str) -> list[dict]:
    q = {"topic": topic, "partition": 0, "mode": "offset", "value": 0}
    r = client.get(f"{prefix}/api/messages", q)
    assert r.status_code == 200, r.content
    return r.json()["records"]


def put_schema(client, prefix: str, topic: str, schema: dict):
    body = {"kind": "avro", "schema": json.dumps(schema)}
    return api(client, "put", f"{prefix}/api/topics/{topic}/schemas/value", body)


def test_uploaded_schemas_are_per_cluster(two, console):
    a, b = two
    topic = unique("sch")  # the same name in both clusters, different records
    produce(a.bootstrap, topic, [(None, avro_bytes(AVRO_USER, {"name": "ann", "visits": 3}))])
    produce(b.bootstrap, topic, [(None, avro_bytes(POINT, {"x": 42}))])
    client = console.login("operator")
    assert put_schema(client, "/c/a", topic, AVRO_USER).status_code == 200
    # b neither lists nor uses a's schema for its own topic of that name
    assert client.get(f"/c/b/api/topics/{topic}/schemas").json() == []
    assert "value_schema" not in read(client, "/c/b", topic)[0]
    assert api(client, "delete", f"/c/b/api/topics/{topic}/schemas/value").status_code == 404
    # b gets its own; each cluster decodes with its own
    assert put_schema(client, "/c/b", topic, POINT).status_code == 200
    assert json.loads(read(client, "", topic)[0]["value_schema"]["json"]) == {
        "name": "ann",
        "visits": 3,
    }
    assert json.loads(read(client, "/c/b", topic)[0]["value_schema"]["json"]) == {"x": 42}
    from console.models import TopicSchema

    rows = TopicSchema.objects.filter(topic=topic).order_by("cluster")
    assert [(r.cluster, json.loads(r.schema)["name"]) for r in rows] == [
        ("a", "User"),
        ("b", "Point"),
    ]
    # deleting b's leaves a's
    assert api(client, "delete", f"/c/b/api/topics/{topic}/schemas/value").status_code == 204
    assert [s["part"] for s in client.get(f"/c/a/api/topics/{topic}/schemas").json()] == ["value"]


@pytest.fixture
def registries():
    """Two registries, both serving a schema with id 1: a User in one, a Point in the
    other (which wants basic auth)."""
    reg_a = Registry({1: {"schema": json.dumps(AVRO_USER)}})
    reg_b = Registry({1: {"schema": json.dumps(POINT)}}, auth=("sr-b", "pw:b"))
    yield reg_a, reg_b
    reg_a.close()
    reg_b.close()


def test_each_cluster_has_its_own_schema_registry(
    settings, console_cluster, second_cluster, redis_server, db, console, registries
):
    from console.schemas import registry as registry_client

    reg_a, reg_b = registries
    point_console_at(settings, console_cluster, redis_server)
    spec_b = cluster_spec("b", second_cluster) | {
        "schema.registry.url": reg_b.url + "/",
        "schema.registry.basic.auth.user.info": "sr-b:pw:b",
    }
    specs = [cluster_spec("a", console_cluster), spec_b, cluster_spec("c", second_cluster)]
    settings.QUILL_CLUSTERS = parse(json.dumps(specs))
    settings.QUILL_SCHEMA_REGISTRY_URL = reg_a.url  # the default cluster's (a) registry
    registry_client.reset()
    topic = unique("sr")
    produce(console_cluster.bootstrap, topic, [(None, wire(1, avro_bytes(AVRO_USER, USER)))])
    produce(second_cluster.bootstrap, topic, [(None, wire(1, avro_bytes(POINT, {"x": 7})))])
    client = console.login("viewer")
    try:
        for _ in range(2):  # the second time from the cache: still each cluster's own id 1
            assert json.loads(read(client, "", topic)[0]["value_schema"]["json"]) == USER
            assert json.loads(read(client, "/c/b", topic)[0]["value_schema"]["json"]) == {"x": 7}
        assert (reg_a.requests, reg_b.requests) == (["/schemas/ids/1"], ["/schemas/ids/1"])
        # c (b's brokers, no registry of its own, not the default): nothing to decode with
        assert "value_schema" not in read(client, "/c/c", topic)[0]
    finally:
        registry_client.reset()
        from cluster_client import zk

        zk.reset()


def test_the_audit_log_names_the_cluster(two, console):
    from console.models import AuditEntry

    client = console.login("admin")
    in_a, in_b = make_topic(client, ""), make_topic(client, "/c/b")
    made = AuditEntry.objects.filter(
        action="topic.create", target__in=[f"topic:{in_a}", f"topic:{in_b}"]
    )
    assert sorted((e.target, e.cluster) for e in made) == sorted(
        [(f"topic:{in_a}", "a"), (f"topic:{in_b}", "b")]
    )
    listed = client.get("/c/b/api/audit", {"target": in_b}).json()
    assert [(e["action"], e["cluster"]) for e in listed] == [("topic.create", "b")]
    page = client.get("/audit/", {"target": in_b}).content.decode()
    assert f'<td class="mono">topic:{in_b}</td><td>b</td>' in page


# ---------------------------------------------------------------- live pages
@pytest.fixture
def two_live(settings, console_cluster, second_cluster, redis_server, transactional_db):
    yield from point_at_both(settings, console_cluster, second_cluster, redis_server)


def _session_cookie() -> bytes:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from console.roles import VIEWER, set_role

    user = get_user_model().objects.create_user(unique("ws"), password="pw")
    set_role(user, VIEWER)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _socket(query: str):
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator

    from console.asgi import application

    cookie = await sync_to_async(_session_cookie)()
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    comm = WebsocketCommunicator(application, f"/ws/live/?{query}", headers=headers)
    connected, code = await comm.connect(timeout=10)
    return comm, connected, code


async def _until_mentioned(comm, name: str) -> list[str]:
    """Every message the socket got until one names `name` (as JSON text)."""
    seen = []
    while True:
        text = json.dumps(await comm.receive_json_from(timeout=20))
        seen.append(text)
        if name in text:
            return seen


async def test_live_pages_of_one_cluster_get_only_its_updates(two_live):
    import asyncio

    from asgiref.sync import sync_to_async
    from confluent_kafka.admin import AdminClient, NewTopic

    from console.monitor.run import Monitor

    a, b = two_live
    monitors = {name: Monitor(interval=0.5, cluster=name) for name in ("a", "b")}
    tasks = [asyncio.create_task(m.run()) for m in monitors.values()]
    try:
        for _ in range(400):
            if all(getattr(m, "watcher", None) and m.watcher.started for m in monitors.values()):
                break
            await asyncio.sleep(0.05)
        sockets = {}
        for name in ("a", "b"):
            comm, connected, _ = await _socket(f"subs=cluster&cluster={name}")
            assert connected
            assert (await comm.receive_json_from(timeout=10))["hello"]
            sockets[name] = comm
        _, connected, code = await _socket("subs=cluster&cluster=nope")
        assert (connected, code) == (False, 4404)

        def create(cluster, topic):
            admin_client = AdminClient({"bootstrap.servers": cluster.bootstrap})
            admin_client.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

        in_a, in_b = unique("la"), unique("lb")
        await sync_to_async(create)(a, in_a)  # a's first: a leak would reach b first
        await sync_to_async(create)(b, in_b)
        seen_b = await _until_mentioned(sockets["b"], in_b)
        assert not [m for m in seen_b if in_a in m]
        seen_a = await _until_mentioned(sockets["a"], in_a)
        assert not [m for m in seen_a if in_b in m]
        for comm in sockets.values():
            await comm.disconnect()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_a_cluster_whose_zookeeper_hangs_does_not_hold_up_another(
    two, console, settings, monkeypatch
):
    """Cluster a's ZooKeeper accepts connections and never answers: while the console
    waits on it (up to its timeout), a page of cluster b still answers."""
    from cluster_client import clusters, zk

    a, b = two
    silent = socket.create_server(("127.0.0.1", 0))
    silent.settimeout(60)
    hung = {**cluster_spec("a", a), "zookeeper.connect": f"127.0.0.1:{silent.getsockname()[1]}"}
    settings.QUILL_CLUSTERS = parse(json.dumps([hung, cluster_spec("b", b)]))
    zk.reset()
    monkeypatch.setattr(zk, "ZK_TIMEOUT_S", 12.0)  # a's attempt: long enough on a busy machine
    client = console.login("viewer")
    assert client.get("/c/b/api/topics").status_code == 200  # b's client is connected
    a_done, outcome = threading.Event(), []

    def connect_a():
        with clusters.activate("a"):
            try:
                zk.client()
            except Exception as exc:  # noqa: BLE001 - what it was is asserted below
                outcome.append(exc)
        a_done.set()

    thread = threading.Thread(target=connect_a, daemon=True)
    thread.start()
    held, _ = silent.accept()  # a's connect attempt is under way
    try:
        assert not a_done.is_set()
        assert client.get("/c/b/api/topics").status_code == 200
        assert not a_done.is_set(), "b's page waited for a's ZooKeeper"
        assert a_done.wait(60)
        assert "ZooKeeper at 127.0.0.1:" in str(outcome[0])
    finally:
        held.close()
        silent.close()
        thread.join(60)
