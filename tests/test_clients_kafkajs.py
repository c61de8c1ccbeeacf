"""KafkaJS (npm, tests/kafkajs) against a real broker, beside librdkafka, kafka-python
and aiokafka: produce and consume with keys and headers, consumer groups and their
offsets, transactions under read_committed, the admin calls, over PLAINTEXT, SSL and
SASL_SSL (SCRAM-SHA-256/512 and PLAIN). Each test runs one node process
(tests/kafkajs_helpers.run_kafkajs) and asserts on the bytes, offsets, assignments and
KafkaJS error class names it reports. Two clusters for the module: a PLAINTEXT one, and
one whose SSL and SASL_SSL listeners the secure tests use."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from quill_stack import ports, tls
from tests.group_helpers import unique
from tests.kafkajs_helpers import (
    BROKER_CONFIG,
    TOPIC_CONFIG,
    admin,
    consume,
    kafkajs_client,
    message,
    produce,
    run_kafkajs,
    topic_spec,
    transaction,
)
from tests.security_helpers import PLAIN_JAAS, jaas, set_scram_user
from tests.txn_helpers import TXN_BROKER

pytestmark = pytest.mark.cluster

NO_AUTO_CREATE = {"auto.create.topics.enable": "false"}
GZIP = 1  # KafkaJS's CompressionTypes.GZIP (its only built-in codec)
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5  # DescribeConfigs' config sources
# KafkaJS's consumer defaults (30 s sessions, 3 s heartbeats) made quick for tests
CONSUMER = {"sessionTimeout": 10000, "heartbeatInterval": 500}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-secret"
USERS = {  # KafkaJS's mechanism names -> (user, password)
    "scram-sha-256": (SCRAM_USER, SCRAM_PASSWORD),
    "scram-sha-512": (SCRAM_USER, SCRAM_PASSWORD),
    "plain": (PLAIN_USER, PLAIN_PASSWORD),
}
KEY_PASSWORD = "keystore-secret"


@pytest.fixture(scope="module")
def plain(cluster_factory):
    cluster = cluster_factory(1, **TXN_BROKER, **NO_AUTO_CREATE)
    return kafkajs_client(cluster.bootstrap)


def _records(n: int, partitions: int, label: bytes = b"") -> list[tuple]:
    """n records (partition, key, value, headers) round robin over the partitions, with
    bytes that are not UTF-8 among them."""
    return [
        (
            i % partitions,
            b"key-%s%d" % (label, i),
            b"value-%s%d\x00\xff" % (label, i),
            {"trace": b"t%d\x80" % i, "origin": b"kafkajs"},
        )
        for i in range(n)
    ]


def _messages(records: list[tuple]) -> list[dict]:
    return [message(v, key=k, headers=h, partition=p) for p, k, v, h in records]


def _expected(records: list[tuple]) -> dict[tuple[int, int], tuple]:
    """(partition, offset) -> (key, value, headers) of records produced in order to an
    empty topic."""
    next_offset: dict[int, int] = {}
    out = {}
    for p, key, value, headers in records:
        offset = next_offset.get(p, 0)
        next_offset[p] = offset + 1
        out[(p, offset)] = (key, value, headers)
    return out


def _read(members, topic: str) -> dict[tuple[int, int], tuple]:
    return {
        (r.partition, r.offset): (r.key, r.value, r.headers)
        for m in members
        for r in m.records
        if r.topic == topic
    }


def _offsets(fetch_offsets_value: list[dict], topic: str) -> dict[int, int]:
    """admin.fetchOffsets' answer for one topic: partition -> committed offset."""
    (entry,) = [t for t in fetch_offsets_value if t["topic"] == topic]
    return {p["partition"]: int(p["offset"]) for p in entry["partitions"]}


def _round_trip(
    client: dict,
    label: str,
    n: int,
    partitions: int,
    consumers: list[dict] = ({},),
    extra_steps: list = (),
    compression: int = 0,
    **consume_step,
) -> SimpleNamespace:
    """Through ``client``: create ``t-kjs-<label>-...`` with ``partitions``, produce ``n``
    records round robin (acks -1, ``compression`` a KafkaJS codec number), consume them
    back with ``consumers`` (KafkaJS consumer configs, all in the group
    ``g-kjs-<label>-...``), then run ``extra_steps`` (a callable one is called with the
    topic and group to make the step). Asserts the topic was created and
    each partition's first record went to offset 0; the rest is the caller's to assert on."""
    topic, group = unique(f"t-kjs-{label}"), unique(f"g-kjs-{label}")
    sent = _records(n, partitions, label.encode())
    members = [{"groupId": group, **CONSUMER, **c} for c in consumers]
    created, produced, consumed, *rest = run_kafkajs(
        client,
        [
            admin("createTopics", {"topics": [topic_spec(topic, partitions)]}),
            produce(topic, _messages(sent), acks=-1, compression=compression),
            consume([topic], n, members, **consume_step),
            *[step(topic, group) if callable(step) else step for step in extra_steps],
        ],
    )
    assert created.value is True
    assert sorted((m["partition"], m["baseOffset"], m["errorCode"]) for m in produced.value) == [
        (p, "0", 0) for p in range(partitions)
    ]
    return SimpleNamespace(
        topic=topic, group=group, expected=_expected(sent), consumed=consumed, rest=rest
    )


def test_produce_consume_group_commit(plain):
    run = _round_trip(
        plain,
        "group",
        9,
        3,
        commit=True,
        extra_steps=[
            lambda topic, group: admin("fetchOffsets", {"groupId": group, "topics": [topic]})
        ],
    )
    (member,) = run.consumed.members
    assert member.crashes == []
    assert member.assignment == {run.topic: [0, 1, 2]}
    assert len(member.records) == 9
    assert _read([member], run.topic) == run.expected
    (fetched,) = run.rest
    assert _offsets(fetched.value, run.topic) == {0: 3, 1: 3, 2: 3}


def test_null_empty_and_repeated_headers(plain):
    topic = unique("t-kjs-edges")
    sent = [
        message(None, partition=0),  # a tombstone without a key
        message(b"", key=b"", partition=0),
        message(b"v", key=b"k", headers={"h": [b"1", b"2"], "e": b""}, partition=0),
    ]
    _, _, consumed = run_kafkajs(
        plain,
        [
            admin("createTopics", {"topics": [topic_spec(topic, 1)]}),
            produce(topic, sent),
            consume([topic], 3, [{"groupId": unique("g-kjs-edges"), **CONSUMER}]),
        ],
    )
    (member,) = consumed.members
    assert [(r.offset, r.key, r.value, r.headers) for r in member.records] == [
        (0, None, None, {}),
        (1, b"", b"", {}),
        (2, b"k", b"v", {"h": [b"1", b"2"], "e": b""}),
    ]


def test_two_consumers_share_partitions(plain):
    run = _round_trip(plain, "share", 8, 4, consumers=[{}, {}], describe=True)
    topic = run.topic
    first, second = run.consumed.members
    assert first.crashes == second.crashes == []
    mine, theirs = set(first.assignment[topic]), set(second.assignment.get(topic, []))
    assert mine and theirs and not mine & theirs
    assert mine | theirs == {0, 1, 2, 3}
    assert _read([first, second], topic) == run.expected
    (described,) = run.consumed.groups
    assert described["groupId"] == run.group and described["state"] == "Stable"
    assert described["protocolType"] == "consumer"
    assert {m["memberId"]: m["memberAssignment"] for m in described["members"]} == {
        first.member_id: first.assignment,
        second.member_id: second.assignment,
    }


def test_transactions_read_committed(plain):
    topic, group = unique("t-kjs-txn"), unique("g-kjs-txn")
    committed = [message(b"c%d" % i, key=b"k", partition=0) for i in range(3)]
    aborted = [message(b"a%d" % i, key=b"k", partition=0) for i in range(3)]
    last = [message(b"c-last", key=b"k", partition=0)]

    def offsets(offset: int) -> dict:  # the group's offset, committed in a transaction
        partitions = [{"partition": 0, "offset": str(offset)}]
        return {"consumerGroupId": group, "topics": [{"topic": topic, "partitions": partitions}]}

    _, txn, read_committed, read_uncommitted, topic_offsets, group_offsets = run_kafkajs(
        plain,
        [
            admin("createTopics", {"topics": [topic_spec(topic, 1)]}),
            transaction(
                topic,
                unique("tx-kjs"),
                [
                    ("commit", committed, offsets(3)),
                    ("abort", aborted, offsets(7)),
                    ("commit", last),
                ],
            ),
            consume([topic], 4, [{"groupId": unique("g-rc"), **CONSUMER}]),
            consume([topic], 7, [{"groupId": unique("g-ru"), "readUncommitted": True, **CONSUMER}]),
            admin("fetchTopicOffsets", topic),
            admin("fetchOffsets", {"groupId": group, "topics": [topic]}),
        ],
    )
    # each transaction ends with its marker: c0..c2 @0-2, marker @3, a0..a2 @4-6,
    # marker @7, c-last @8, marker @9
    assert [(b["end"], b["metadata"][0]["baseOffset"]) for b in txn.value] == [
        ("commit", "0"),
        ("abort", "4"),
        ("commit", "8"),
    ]
    (rc,) = read_committed.members
    assert [(r.offset, r.value) for r in rc.records] == [
        (0, b"c0"),
        (1, b"c1"),
        (2, b"c2"),
        (8, b"c-last"),
    ]
    (ru,) = read_uncommitted.members
    assert [(r.offset, r.value) for r in ru.records] == [
        (0, b"c0"),
        (1, b"c1"),
        (2, b"c2"),
        (4, b"a0"),
        (5, b"a1"),
        (6, b"a2"),
        (8, b"c-last"),
    ]
    (partition,) = topic_offsets.value
    assert (partition["low"], partition["high"]) == ("0", "10")
    # the offsets sent in the committed transaction count; those of the aborted do not
    assert _offsets(group_offsets.value, topic) == {0: 3}


def test_admin_calls(plain):
    topic, group = unique("t-kjs-admin"), unique("g-kjs-admin")
    topic_resource = {"type": TOPIC_CONFIG, "name": topic}
    describe = admin(
        "describeConfigs",
        {
            "resources": [{**topic_resource, "configNames": ["retention.ms"]}],
            "includeSynonyms": False,
        },
    )
    steps = [
        admin("createTopics", {"topics": [topic_spec(topic, 2)]}),
        admin("createTopics", {"topics": [topic_spec(topic, 2)]}),
        admin("listTopics"),
        admin("fetchTopicMetadata", {"topics": [topic]}),
        describe,
        admin(
            "alterConfigs",
            {
                "resources": [
                    {
                        **topic_resource,
                        "configEntries": [{"name": "retention.ms", "value": "3600000"}],
                    }
                ]
            },
        ),
        describe,
        admin("createPartitions", {"topicPartitions": [{"topic": topic, "count": 4}]}),
        admin("createPartitions", {"topicPartitions": [{"topic": topic, "count": 3}]}),
        admin("fetchTopicMetadata", {"topics": [topic]}),
        produce(topic, _messages(_records(8, 4))),
        admin("fetchTopicOffsets", topic),
        consume([topic], 8, [{"groupId": group, **CONSUMER}], commit=True),
        admin("listGroups"),
        admin("describeGroups", [group]),
        admin("fetchOffsets", {"groupId": group, "topics": [topic]}),
        admin("resetOffsets", {"groupId": group, "topic": topic, "earliest": True}),
        admin("fetchOffsets", {"groupId": group, "topics": [topic]}),
        admin(
            "setOffsets",
            {"groupId": group, "topic": topic, "partitions": [{"partition": 1, "offset": "1"}]},
        ),
        admin("fetchOffsets", {"groupId": group, "topics": [topic]}),
        admin("deleteGroups", [group]),
        admin("listGroups"),
        admin("deleteTopics", {"topics": [topic]}),
        admin("listTopics"),
    ]
    (
        created,
        created_again,
        listed,
        metadata,
        config_before,
        altered,
        config_after,
        grown,
        shrunk,
        metadata_after,
        produced,
        topic_offsets,
        consumed,
        groups,
        described,
        committed,
        reset,
        after_reset,
        set_offsets,
        after_set,
        deleted_groups,
        groups_after,
        deleted_topics,
        listed_after,
    ) = run_kafkajs(plain, steps)
    assert created.value is True
    assert created_again.value is False  # KafkaJS's answer to TOPIC_ALREADY_EXISTS
    assert topic in listed.value
    ((meta,),) = metadata.value.values()
    assert meta["name"] == topic
    assert sorted(
        (p["partitionId"], p["leader"], p["partitionErrorCode"]) for p in meta["partitions"]
    ) == [
        (0, 1, 0),
        (1, 1, 0),
    ]
    assert _config(config_before, "retention.ms") == "604800000"  # Kafka's default, 7 days
    assert [r["errorCode"] for r in altered.value["resources"]] == [0]
    assert _config(config_after, "retention.ms") == "3600000"
    assert grown.ok  # KafkaJS resolves createPartitions with nothing
    assert (shrunk.error["name"], shrunk.error["type"]) == (
        "KafkaJSProtocolError",
        "INVALID_PARTITIONS",
    )
    ((meta,),) = metadata_after.value.values()
    assert sorted(p["partitionId"] for p in meta["partitions"]) == [0, 1, 2, 3]
    assert all(m["errorCode"] == 0 for m in produced.value)
    assert sorted((p["partition"], p["low"], p["high"]) for p in topic_offsets.value) == [
        (0, "0", "2"),
        (1, "0", "2"),
        (2, "0", "2"),
        (3, "0", "2"),
    ]
    assert len(consumed.members[0].records) == 8
    assert {"groupId": group, "protocolType": "consumer"} in groups.value["groups"]
    (g,) = described.value["groups"]
    assert (g["groupId"], g["state"], g["members"], g["errorCode"]) == (group, "Empty", [], 0)
    assert _offsets(committed.value, topic) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert reset.ok
    # KafkaJS commits its EARLIEST marker (-2) as the offset and Kafka keeps it as
    # committed (KafkaJS's own suite expects '-2' back from Apache Kafka)
    assert _offsets(after_reset.value, topic) == {0: -2, 1: -2, 2: -2, 3: -2}
    assert set_offsets.ok
    assert _offsets(after_set.value, topic) == {0: -2, 1: 1, 2: -2, 3: -2}
    assert [(d["groupId"], d["errorCode"]) for d in deleted_groups.value] == [(group, 0)]
    assert group not in {g["groupId"] for g in groups_after.value["groups"]}
    assert deleted_topics.ok
    assert topic not in listed_after.value


def _config(result, name: str) -> str:
    (resource,) = result.value["resources"]
    assert resource["errorCode"] == 0
    (entry,) = [e for e in resource["configEntries"] if e["configName"] == name]
    return entry["configValue"]


def test_broker_configs_and_synonyms(plain):
    """Booleans are Kafka's "true"/"false" in a config's value and in its synonyms; the
    synonyms are Kafka's ConfigHelper list: each level that sets the key, then its default."""
    (described,) = run_kafkajs(
        plain,
        [
            admin(
                "describeConfigs",
                {
                    "resources": [
                        {
                            "type": BROKER_CONFIG,
                            "name": "1",
                            "configNames": ["delete.topic.enable", "auto.create.topics.enable"],
                        }
                    ],
                    "includeSynonyms": True,
                },
            )
        ],
    )
    (resource,) = described.value["resources"]
    assert resource["errorCode"] == 0
    rows = {e["configName"]: e for e in resource["configEntries"]}
    assert {k: (e["configValue"], e["configSource"]) for k, e in rows.items()} == {
        "delete.topic.enable": ("true", DEFAULT_CONFIG),
        "auto.create.topics.enable": ("false", STATIC_BROKER_CONFIG),
    }
    synonyms = {
        k: [(s["configValue"], s["configSource"]) for s in e["configSynonyms"]]
        for k, e in rows.items()
    }
    assert synonyms == {
        "delete.topic.enable": [("true", DEFAULT_CONFIG)],
        "auto.create.topics.enable": [("false", STATIC_BROKER_CONFIG), ("true", DEFAULT_CONFIG)],
    }
    for name, entry in rows.items():
        assert {s["configName"] for s in entry["configSynonyms"]} == {name}


# SSL and SASL_SSL


@pytest.fixture(scope="module")
def secure(cluster_factory, tmp_path_factory):
    """One broker: PLAINTEXT, SSL (no client certificate asked) and SASL_SSL (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512) listeners; certificates from the stack's CA code."""
    pki = tmp_path_factory.mktemp("kafkajs-pki")
    broker_cert = tls.issue(pki, "broker", ("localhost", "127.0.0.1"), key_password=KEY_PASSWORD)
    ssl_port, sasl_ssl_port = ports.free_ports(2)
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},"
        f"SASL_SSL://127.0.0.1:{sasl_ssl_port}"
    )
    cluster = cluster_factory(
        1,
        **{
            **NO_AUTO_CREATE,
            "group.initial.rebalance.delay.ms": "0",
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(broker_cert.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas(
                PLAIN_JAAS, **{f"user_{PLAIN_USER}": PLAIN_PASSWORD}
            ),
        },
    )
    set_scram_user(cluster.zk_client(), SCRAM_USER, SCRAM_PASSWORD)
    ca = {"ca": str(pki / "ca.crt")}
    return SimpleNamespace(
        ssl=kafkajs_client(f"127.0.0.1:{ssl_port}", ssl=ca),
        sasl_ssl=lambda sasl: kafkajs_client(f"127.0.0.1:{sasl_ssl_port}", ssl=ca, sasl=sasl),
    )


def _read_back(run) -> None:
    (member,) = run.consumed.members
    assert member.crashes == []
    assert _read([member], run.topic) == run.expected


def test_ssl_round_trip(secure):
    _read_back(_round_trip(secure.ssl, "ssl", 6, 2, compression=GZIP))


@pytest.mark.parametrize("mechanism", ["scram-sha-256", "scram-sha-512", "plain"])
def test_sasl_ssl_round_trip_and_wrong_password(secure, mechanism):
    user, password = USERS[mechanism]
    client = secure.sasl_ssl({"mechanism": mechanism, "username": user, "password": password})
    wrong = {"sasl": {"mechanism": mechanism, "username": user, "password": password + "-wrong"}}
    run = _round_trip(
        client,
        mechanism,
        6,
        2,
        extra_steps=[produce(unique("t-never"), [message(b"never")], client=wrong)],
    )
    _read_back(run)
    (refused,) = run.rest
    assert not refused.ok
    assert refused.error["name"] == "KafkaJSSASLAuthenticationError", refused.error
