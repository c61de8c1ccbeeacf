"""The REST API under hostile input: schemathesis generates requests from the API's own
OpenAPI schema (fetched from /api/schema with a bearer token), valid and invalid, for
every operation, and sends them to the console pointed at a real broker and a real
Redis. No answer may be a 5xx; every 4xx is JSON with a sentence. Mutating operations
get throwaway topics and groups (and the protected topics, which they must refuse); a
keeper topic and group made before the run must hold exactly what they held.

QUILL_API_FUZZ_CASES (default 15) sets the cases per operation and per generation
mode (valid and invalid); the draws are seeded (SEED), so a run is repeatable. A longer
run: QUILL_API_FUZZ_CASES=500 pytest tests/test_console_api_hostile.py."""

from __future__ import annotations

import json
import os
import uuid
from urllib.parse import urlencode

import pytest
import schemathesis
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from hypothesis import HealthCheck, given, seed
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from broker.protocol.internal_topics import OFFSETS_TOPIC, PROTECTED_TOPICS, SINK_COMMITS_TOPIC
from tests.cli_helpers import cli

pytest_plugins = ["tests.console_helpers"]
pytestmark = [
    pytest.mark.cluster,
    # schemathesis draws with `random` inside its strategies; not ours to change
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning"),
]

# 15 (was 100, then 40) keeps the suite inside its time budget: a smoke run in which
# every operation still gets both generation modes and its path-parameter pools, from
# the same seed (the protected topics' refusals are asserted case by case above it).
# Longer runs: QUILL_API_FUZZ_CASES=500.
CASES = int(os.environ.get("QUILL_API_FUZZ_CASES", "15"))
SEED = 14
KEEPER_RECORDS = [(f"k{i}".encode(), f"value {i}".encode()) for i in range(20)]
# The changes the protected topics refuse, whatever their input.
REFUSED = {("DELETE", "/api/topics/{name}"), ("POST", "/api/topics/{name}/partitions")}
POOL = 4  # throwaway topics or groups per changing operation
MAX_PARTITIONS = 4  # the console's partition bound during the run (QUILL_MAX_PARTITIONS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _operations() -> list[tuple[str, str]]:
    from console.api import api

    schema = api.get_openapi_schema(path_prefix="/api/")
    return sorted((m.upper(), path) for path, ops in schema["paths"].items() for m in ops)


OPERATIONS = _operations()


@pytest.fixture(scope="module")
def keeper(console_cluster):
    """A topic with known records and a group with committed offsets, made with
    librdkafka before the fuzz; plus the protected topics, existing as in a real cluster."""
    conf = {"bootstrap.servers": console_cluster.bootstrap}
    admin = AdminClient(conf)
    topic = unique("keeper")
    new = [NewTopic(topic, 2, 1), NewTopic(SINK_COMMITS_TOPIC, 1, 1)]
    for future in admin.create_topics(new, operation_timeout=30).values():
        future.result(60)
    producer = Producer({**conf, "enable.idempotence": True})
    for key, value in KEEPER_RECORDS:
        producer.produce(topic, value, key, partition=0)
    assert producer.flush(60) == 0
    group = unique("keeper-group")
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 0)], asynchronous=False
    )
    consumer.close()
    return {
        "topic": topic,
        "group": group,
        "conf": conf,
        "offsets_partitions": _partition_count(conf, OFFSETS_TOPIC),
    }


@pytest.fixture
def api_client(console, settings, keeper):
    """A Django client and an admin's bearer token; the console's partition bound is
    lowered so valid creates stay small."""
    from django.test import Client

    from console.changes import Actor
    from console.changes.users import issue_token

    settings.QUILL_MAX_PARTITIONS = MAX_PARTITIONS
    user = console.user("admin")
    _, token = issue_token(Actor(user, "ui"), "schemathesis")
    return Client(), {"HTTP_AUTHORIZATION": f"Bearer {token}"}, user


def _partition_count(conf: dict, topic: str) -> int:
    return len(AdminClient(conf).list_topics(topic, timeout=30).topics[topic].partitions)


def test_the_sink_marker_topic_is_the_pipelines():
    from pipeline.exactly_once import COMMITS_TOPIC

    assert COMMITS_TOPIC == SINK_COMMITS_TOPIC


def test_schema_and_docs_open_with_a_bearer_token(console):
    from django.test import Client

    from console.changes import Actor
    from console.changes.users import issue_token

    client = Client()
    _, viewer_token = issue_token(Actor(console.user("viewer"), "ui"), "docs")
    _, norole_token = issue_token(Actor(console.user("norole"), "ui"), "docs")
    for path in ("/api/schema", "/api/docs"):
        assert client.get(path, HTTP_AUTHORIZATION=f"Bearer {viewer_token}").status_code == 200
        denied = client.get(path, HTTP_AUTHORIZATION=f"Bearer {norole_token}")
        assert denied.status_code == 403 and "viewer role" in denied.json()["detail"]
        unknown = client.get(path, HTTP_AUTHORIZATION="Bearer qk_nonsense")
        assert unknown.status_code == 401 and "token" in unknown.json()["detail"]
        assert client.get(path).status_code == 302  # no token: the session's login page
    schema = client.get("/api/schema", HTTP_AUTHORIZATION=f"Bearer {viewer_token}").json()
    assert "/api/audit" in schema["paths"]


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/audit?limit=-12956", "limit"),
        ("/api/audit?limit=0", "limit"),
        ("/api/events?limit=-1", "limit"),
        ("/api/events?limit=5001", "limit"),
        ("/api/groups/g/lag?seconds=-5", "seconds"),
        ("/api/groups/g/lag?seconds=" + "9" * 400, "seconds"),
        ("/api/messages?topic=__consumer_offsets&limit=501", "limit"),
    ],
)
def test_limits_out_of_range_are_400_naming_the_field(console, keeper, path, field):
    answer = console.login("viewer").get(path)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["errors"] and answer.json()["detail"]


@pytest.mark.parametrize("topic", sorted(PROTECTED_TOPICS))
def test_protected_topics_are_refused_by_api_and_pages(console, keeper, topic):
    before = _partition_count(keeper["conf"], OFFSETS_TOPIC)
    client = console.login("admin")
    grow = client.post(
        f"/api/topics/{topic}/partitions",
        data=json.dumps({"count": 5125}),
        content_type="application/json",
    )
    assert grow.status_code == 400, grow.content
    assert grow.json()["detail"].startswith(f"Cannot add partitions to {topic}: ")
    assert grow.json()["errors"]["name"] == grow.json()["detail"]
    made = client.post(
        "/api/topics", data=json.dumps({"name": topic}), content_type="application/json"
    )
    assert made.status_code == 400 and "created by Quill itself" in made.json()["errors"]["name"]
    gone = client.delete(f"/api/topics/{topic}")
    assert gone.status_code == 400 and gone.json()["detail"].startswith(f"Cannot delete {topic}: ")
    page = client.post(f"/topics/{topic}/partitions", {"partitions": "60"}, follow=True)
    assert f"Cannot add partitions to {topic}" in page.content.decode()
    page = client.post(f"/topics/{topic}/delete", {"confirm": topic}, follow=True)
    assert f"Cannot delete {topic}" in page.content.decode()
    if topic != "__transaction_state":  # made by the first transactional producer
        shown = client.get(f"/topics/{topic}/").content.decode()
        assert f"Cannot add partitions to or delete {topic}: " in shown
        assert f"/topics/{topic}/delete" not in shown and f"/topics/{topic}/partitions" not in shown
    assert _partition_count(keeper["conf"], OFFSETS_TOPIC) == before


def test_the_broker_refuses_changes_to_internal_topics(keeper):
    admin = AdminClient(keeper["conf"])
    before = _partition_count(keeper["conf"], OFFSETS_TOPIC)
    grow = admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 5125)])[OFFSETS_TOPIC]
    with pytest.raises(KafkaException) as refused:
        grow.result(60)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "committed offsets" in refused.value.args[0].str()
    delete = admin.delete_topics([OFFSETS_TOPIC], operation_timeout=30)[OFFSETS_TOPIC]
    with pytest.raises(KafkaException) as refused:
        delete.result(60)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION  # INVALID_TOPIC_EXCEPTION
    assert _partition_count(keeper["conf"], OFFSETS_TOPIC) == before


@pytest.mark.parametrize("topic", [OFFSETS_TOPIC, SINK_COMMITS_TOPIC])
def test_quill_topics_refuses_changes_to_protected_topics(console_cluster, keeper, topic):
    bootstrap = ("--bootstrap-server", console_cluster.bootstrap)
    grow = cli("topics", *bootstrap, "--alter", "--topic", topic, "--partitions", "60")
    assert grow.code == 1 and f"Cannot add partitions to {topic}: " in grow.err
    gone = cli("topics", *bootstrap, "--delete", "--topic", topic)
    assert gone.code == 1 and f"Cannot delete {topic}: " in gone.err
    assert _partition_count(keeper["conf"], topic) == (
        1 if topic == SINK_COMMITS_TOPIC else keeper["offsets_partitions"]
    )


def _throwaway_topics(count: int) -> list[str]:
    from cluster_client import admin

    names = [unique("fuzz") for _ in range(count)]
    for name in names:
        admin.create_topic(name, 1, 1, {})
    return names


def _throwaway_groups(count: int) -> list[str]:
    from cluster_client import admin

    (topic,) = _throwaway_topics(1)
    groups = [unique("fuzz-group") for _ in range(count)]
    for group in groups:
        admin.alter_group_offsets(group, {(topic, 0): 0})
    return groups


def _path_parameters(method: str, path: str, keeper: dict) -> dict:
    """Strategies for path parameters: reads see the keeper's too; changes get a few
    throwaway topics and groups made for this operation (a delete finds them gone after
    the first time), or a protected topic (which they must refuse)."""
    out = {}
    if "{name}" in path:
        if method == "GET":
            out["name"] = st.sampled_from([keeper["topic"], OFFSETS_TOPIC]) | st.text(max_size=40)
        else:
            out["name"] = st.sampled_from(_throwaway_topics(POOL)) | st.text(max_size=40)
            if (method, path) in REFUSED:
                out["name"] |= st.sampled_from(sorted(PROTECTED_TOPICS))
    if "{group_id}" in path:
        if method == "GET":
            out["group_id"] = st.just(keeper["group"]) | st.text(max_size=40)
        else:
            out["group_id"] = st.sampled_from(_throwaway_groups(POOL)) | st.text(max_size=40)
    return out


def _send(client, auth: dict, case):
    path = case.formatted_path
    if case.query:
        path += "?" + urlencode(case.query, doseq=True)
    kwargs = dict(auth)
    if case.body is not schemathesis.core.NOT_SET:
        body = case.body
        kwargs["data"] = body if isinstance(body, bytes) else json.dumps(body)
        kwargs["content_type"] = "application/json"
    return client.generic(case.method, path, **kwargs)


def _check(case, response) -> None:
    where = f"{case.method} {case.formatted_path} query={case.query} body={case.body!r}"
    assert response.status_code < 500, (
        f"{where} -> {response.status_code}: {response.content[:500]!r}"
    )
    if 400 <= response.status_code < 500 and response.get("Content-Type") == "application/json":
        detail = response.json().get("detail")
        assert isinstance(detail, str) and detail, f"{where}: no sentence in {response.content!r}"
    target = (case.path_parameters or {}).get("name")
    if (case.method, case.path) in REFUSED and target in PROTECTED_TOPICS:
        assert response.status_code in (400, 403), (
            f"{where} was not refused: {response.status_code}"
        )


_SCHEMA: list = []  # the API's schema as the console serves it, fetched once


def _api_schema(client, auth: dict):
    """The schema from /api/schema (with the run's settings: the first fuzzed operation
    fetches it), loaded by schemathesis; fetched and loaded once a run, not for each of
    the ~50 operations (the same bytes each time: a second or so of CPU each)."""
    if not _SCHEMA:
        fetched = client.get("/api/schema", **auth)
        assert fetched.status_code == 200, fetched.content[:300]
        _SCHEMA.append(schemathesis.openapi.from_dict(fetched.json()))
    return _SCHEMA[0]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_no_operation_answers_a_server_error(api_client, keeper, method, path):
    client, auth, user = api_client
    operation = _api_schema(client, auth)[path][method]
    params = _path_parameters(method, path, keeper)
    modes = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
    for mode in modes:
        strategy = st.fixed_dictionaries(params).flatmap(
            lambda values, mode=mode: operation.as_strategy(mode, path_parameters=values)
        )

        @seed(SEED)
        @hsettings(
            max_examples=CASES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy)
        def run(case):
            _check(case, _send(client, auth, case))

        run()
    if path == "/api/quotas":
        _remove_quotas(user)


def _remove_quotas(user) -> None:
    """Quotas the fuzz set would throttle the tests after it."""
    from console.changes import Actor
    from console.changes import quotas as quota_ops

    for row in quota_ops.list_all():
        quota_ops.delete(Actor(user, "api"), row["user"], row["client"])


def test_the_fuzz_left_the_keepers_intact(keeper):
    """Runs after the fuzz: the keeper's records and offsets, and the internal topics'
    partition counts, are what they were."""
    conf = keeper["conf"]
    topic = keeper["topic"]
    consumer = Consumer({**conf, "group.id": unique("check"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    while len(got) < len(KEEPER_RECORDS):
        msg = consumer.poll(30)
        assert msg is not None, f"only {len(got)} of the keeper's records came back"
        assert msg.error() is None, msg.error()
        got.append((msg.key(), msg.value()))
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=30)
    consumer.close()
    assert got == KEEPER_RECORDS and (low, high) == (0, 0)
    keeper_group = Consumer({**conf, "group.id": keeper["group"], "enable.auto.commit": False})
    committed = keeper_group.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], 30)
    keeper_group.close()
    assert [c.offset for c in committed] == [7, 0]
    assert _partition_count(conf, topic) == 2
    assert _partition_count(conf, OFFSETS_TOPIC) == keeper["offsets_partitions"]
    assert _partition_count(conf, SINK_COMMITS_TOPIC) == 1
