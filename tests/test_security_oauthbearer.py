"""SASL/OAUTHBEARER on a real broker: an UNSECURED listener (KIP-255's unsecured JWS, as
librdkafka makes them with ``sasl.oauthbearer.config``) and an OIDC listener (KIP-768:
RS256/ES256 tokens checked against a JWKS served by a tiny HTTP server on 127.0.0.1),
the same over TLS (SECURE, SASL_SSL), beside a PLAINTEXT one for the tests' admin. Asserts records and offsets through
confluent-kafka, the exact bytes of the exchange (the ``{"status":"invalid_token"}``
challenge, then SASL_AUTHENTICATION_FAILED), the broker's log line with the reason,
ACLs on ``User:<sub>``, and the session lifetime bound to the token's ``exp``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic, ResourceType

from broker.protocol.errors import ErrorCode
from broker.protocol.records import build_batch
from tests.acl_helpers import add_acl
from tests.cli_helpers import tool
from tests.metrics_helpers import value
from tests.oauth_helpers import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    SigningKey,
    client_first,
    oauth_conf,
    token_cb,
    unsecured_token,
)
from tests.security_helpers import internal_listener, jaas, round_trip
from tests.wait_helpers import wait_log, wait_until
from tests.wire import WireClient

pytestmark = pytest.mark.cluster

TOPIC, ACL_TOPIC = "oauth-records", "oauth-acl"
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
)
UNSECURED_REAUTH_MS = 5000
INVALID = b'{"status":"invalid_token"}'


@pytest.fixture(scope="module")
def keys():
    return {"rsa": SigningKey("rsa-1", "RS256"), "ec": SigningKey("ec-1", "ES256")}


@pytest.fixture(scope="module")
def jwks(keys):
    server = JwksServer([keys["rsa"], keys["ec"]])
    yield server
    server.close()


@pytest.fixture(scope="module")
def oauth_cluster(cluster_factory, jwks, tmp_path_factory):
    from quill_stack import ports, tls

    pki = tmp_path_factory.mktemp("oauth-pki")
    keystore = tls.issue(pki, "broker", ("localhost", "127.0.0.1")).keystore
    unsecured, oidc, secure = ports.free_ports(3)
    listeners = lambda _b, port: (  # noqa: E731
        f"PLAINTEXT://127.0.0.1:{port},UNSECURED://127.0.0.1:{unsecured},"
        f"OIDC://127.0.0.1:{oidc},SECURE://127.0.0.1:{secure}"
    )
    cluster = cluster_factory(
        1,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,OIDC:SASL_PLAINTEXT,SECURE:SASL_SSL"
            ),
            # SECURE: OIDC tokens over TLS
            "listener.name.secure.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "listener.name.secure.sasl.oauthbearer.jwks.endpoint.url": jwks.url,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.unsecured.oauthbearer.sasl.jaas.config": jaas(
                OAUTH_JAAS,
                unsecuredValidatorRequiredScope="kafka",
                unsecuredValidatorAllowableClockSkewMs="1000",
            ),
            "listener.name.unsecured.oauthbearer.connections.max.reauth.ms": str(
                UNSECURED_REAUTH_MS
            ),
            "listener.name.oidc.oauthbearer.sasl.jaas.config": jaas(OAUTH_JAAS),
            "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class": OIDC_HANDLER,
            "listener.name.oidc.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks.url,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "connections.max.reauth.ms": "600000",
            "group.initial.rebalance.delay.ms": "0",  # subscribing tests need not wait 3 s
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "super.users": "User:ANONYMOUS",
            "auto.create.topics.enable": "false",
            "quill.metrics.port": "free",
        },
    )
    cluster.unsecured = f"127.0.0.1:{unsecured}"
    cluster.oidc = f"127.0.0.1:{oidc}"
    cluster.secure = f"127.0.0.1:{secure}"
    cluster.ca = str(pki / "ca.crt")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name in (TOPIC, ACL_TOPIC):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    add_acl(admin, ResourceType.TOPIC, ACL_TOPIC, AclOperation.ALL, principal="User:alice")
    return cluster


def _broker_log(cluster) -> str:
    return Path(cluster.brokers[0].log_path).read_text(errors="replace")


def _wire(bootstrap: str) -> WireClient:
    c = WireClient.for_bootstrap(bootstrap)
    assert c.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    return c


def _lifetime_ms(resp) -> int:
    return int(resp.session_lifetime.total_seconds() * 1000)


def _assert_refused(bootstrap: str, message: bytes, challenge: bytes = INVALID) -> None:
    """Kafka's exchange for a bad token: the JSON error challenge, the client's 0x01,
    SASL_AUTHENTICATION_FAILED, then a closed connection."""
    c = _wire(bootstrap)
    first = c.request(36, 2, {"auth_bytes": message})
    assert (first.error_code, first.auth_bytes) == (ErrorCode.none, challenge)
    final = c.request(36, 2, {"auth_bytes": b"\x01"})
    assert final.error_code == ErrorCode.sasl_authentication_failed
    assert final.error_message == challenge.decode()
    with pytest.raises((ConnectionError, OSError)):
        c.request(3, 9, {"topics": []})
    c.close()


def test_librdkafka_unsecured_token_produces_and_consumes(oauth_cluster):
    conf = oauth_conf(
        oauth_cluster.unsecured,
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=alice scope=kafka",
        },
    )
    values = [f"unsecured-{i}".encode() for i in range(5)]
    got = round_trip(conf, TOPIC, values, "g-unsecured")
    assert [v for _, v in got] == values
    offsets = [o for o, _ in got]
    assert offsets == list(range(offsets[0], offsets[0] + 5))


@pytest.mark.parametrize(("kind", "listener"), [("rsa", "oidc"), ("ec", "oidc"), ("rsa", "secure")])
def test_librdkafka_oidc_tokens_from_oauth_cb(oauth_cluster, keys, kind, listener):
    key = keys[kind]
    conf = oauth_conf(
        getattr(oauth_cluster, listener), oauth_cb=token_cb(lambda: key.token("alice"))
    )
    if listener == "secure":
        conf.update({"security.protocol": "SASL_SSL", "ssl.ca.location": oauth_cluster.ca})
    values = [f"oidc-{kind}-{listener}-{i}".encode() for i in range(3)]
    got = round_trip(conf, TOPIC, values, f"g-oidc-{kind}-{listener}")
    assert [v for _, v in got] == values


def test_unsecured_token_over_the_wire_and_its_principal(oauth_cluster):
    c = _wire(oauth_cluster.unsecured)
    token = unsecured_token("carol", scope=["kafka", "other"])
    resp = c.request(36, 2, {"auth_bytes": client_first(token, authzid="carol", traceId="x1")})
    assert (resp.error_code, resp.auth_bytes) == (ErrorCode.none, b"")
    # the listener's connections.max.reauth.ms (5 s) is below the token's 300 s
    assert _lifetime_ms(resp) == UNSECURED_REAUTH_MS
    meta = c.request(3, 9, {"topics": [{"name": TOPIC}]})
    assert [t.name for t in meta.topics] == [TOPIC]
    c.close()


def test_unsecured_listener_refusals(oauth_cluster, keys):
    bootstrap = oauth_cluster.unsecured
    _assert_refused(bootstrap, client_first(unsecured_token("alice", -60, scope="kafka")))
    _assert_refused(bootstrap, client_first(unsecured_token(None, scope="kafka")))
    _assert_refused(bootstrap, client_first(keys["rsa"].token("alice", scope="kafka")))
    _assert_refused(
        bootstrap,
        client_first(unsecured_token("alice", scope="other")),
        b'{"status":"insufficient_scope","scope":"kafka"}',
    )
    wait_log(oauth_cluster, "was missing a required scope (kafka)")


def test_authzid_other_than_the_principal_fails_at_once(oauth_cluster):
    c = _wire(oauth_cluster.unsecured)
    token = unsecured_token("alice", scope="kafka")
    resp = c.request(36, 2, {"auth_bytes": client_first(token, authzid="admin")})
    assert resp.error_code == ErrorCode.sasl_authentication_failed
    assert "different from the token's principal name (alice)" in resp.error_message
    c.close()


def test_oidc_token_lifetime_bounds_the_session(oauth_cluster, keys):
    c = _wire(oauth_cluster.oidc)
    exp = int(time.time()) + 120
    token = keys["rsa"].token("alice", exp=exp)
    resp = c.request(36, 2, {"auth_bytes": client_first(token)})
    assert resp.error_code == ErrorCode.none
    left_ms = exp * 1000 - int(time.time() * 1000)
    # the token's exp (about 120 s away), not connections.max.reauth.ms (600 s)
    assert left_ms - 5000 <= _lifetime_ms(resp) <= 120_000
    # re-authentication (KIP-368) with a fresh token for the same subject
    assert c.request(17, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    again = c.request(36, 2, {"auth_bytes": client_first(keys["ec"].token("alice", 60))})
    assert again.error_code == ErrorCode.none
    assert 50_000 <= _lifetime_ms(again) <= 60_000
    c.close()


def test_librdkafka_reauthenticates_with_fresh_tokens_before_they_expire(oauth_cluster, keys):
    """Tokens that live 10 s: each session ends with its token, librdkafka asks oauth_cb
    for a new one (at 80% of its life) and re-authenticates with it before the session
    ends (at 85-95%), and the broker kills no connection."""
    labels = {"listener": "OIDC", "networkProcessor": "0"}
    port = oauth_cluster.brokers[0].metrics_port
    metric = "kafka_server_socket_server_metrics_"
    reauths = value(port, metric + "successful_reauthentication_total", **labels)
    killed = value(port, metric + "expired_connections_killed_count", **labels)
    issued = []

    def fresh():
        issued.append(keys["rsa"].token("alice", 10))
        return issued[-1]

    producer = Producer(oauth_conf(oauth_cluster.oidc, oauth_cb=token_cb(fresh)))
    delivered = []

    def reauthenticated_twice() -> bool:
        # librdkafka serves oauth_cb from poll(): keep producing and polling meanwhile
        producer.produce(TOPIC, b"reauth", on_delivery=lambda e, _m: delivered.append(e))
        producer.poll(0.1)
        return value(port, metric + "successful_reauthentication_total", **labels) >= reauths + 2

    wait_until(reauthenticated_twice, timeout=90, what="two re-authentications")
    assert producer.flush(30) == 0
    assert delivered and all(e is None for e in delivered)
    assert len(issued) >= 2
    assert value(port, metric + "expired_connections_killed_count", **labels) == killed


def _bad_tokens(keys) -> dict[str, str]:
    rsa, ec = keys["rsa"], keys["ec"]
    forged = SigningKey("rsa-1", "RS256")  # the right kid, another private key
    return {
        "expired": rsa.token("alice", -120),
        "wrong audience": rsa.token("alice", aud="someone-else"),
        "wrong issuer": rsa.token("alice", iss="https://evil.test"),
        "no exp": rsa.token("alice", exp=None),
        "bad signature": forged.token("alice"),
        "unknown kid": rsa.token("alice", kid="nobody"),
        "wrong key kind": ec.token("alice", kid="rsa-1"),
        "alg none": unsecured_token("alice"),
        "no sub": rsa.token(None),
    }


def test_oidc_listener_refuses_bad_tokens(oauth_cluster, keys):
    for what, token in _bad_tokens(keys).items():
        try:
            _assert_refused(oauth_cluster.oidc, client_first(token))
        except AssertionError as exc:
            raise AssertionError(f"{what}: {exc}") from None
    log = _broker_log(oauth_cluster)
    for reason in (
        "ExpiredSignatureError",
        "InvalidAudienceError",
        "InvalidIssuerError",
        "InvalidSignatureError",
        "Unknown key id (kid) 'nobody'",
        "JWT algorithm 'none' is not allowed",
    ):
        assert reason in log, reason
    assert "OAUTHBEARER OIDC token refused" in log
    assert "Failed authentication with 127.0.0.1:" in log


def test_librdkafka_with_a_refused_token_reports_authentication_failure(oauth_cluster, keys):
    conf = oauth_conf(
        oauth_cluster.oidc, oauth_cb=token_cb(lambda: keys["rsa"].token("a", -60), 300)
    )
    errors = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not errors:
        producer.poll(0.2)
    assert errors and "invalid_token" in errors[0].str()


def test_acls_apply_to_the_token_subject(oauth_cluster, keys):
    def produce_error(sub: str):
        conf = oauth_conf(oauth_cluster.oidc, oauth_cb=token_cb(lambda: keys["rsa"].token(sub)))
        outcome = []
        producer = Producer({**conf, "message.timeout.ms": 20000})
        producer.produce(ACL_TOPIC, b"v", on_delivery=lambda err, _m: outcome.append(err))
        producer.flush(30)
        assert outcome, "no delivery report"
        return None if outcome[0] is None else outcome[0].code()

    assert produce_error("alice") is None
    assert produce_error("bob") == 29  # TOPIC_AUTHORIZATION_FAILED for User:bob


def test_a_key_added_to_the_jwks_is_fetched_for_its_unknown_kid(oauth_cluster, jwks):
    rotated = SigningKey("rsa-2", "RS256")
    jwks.keys.append(rotated)
    try:
        c = _wire(oauth_cluster.oidc)
        resp = c.request(36, 2, {"auth_bytes": client_first(rotated.token("alice"))})
        assert (resp.error_code, resp.auth_bytes) == (ErrorCode.none, b"")
        c.close()
    finally:
        jwks.keys.remove(rotated)


def test_a_slow_jwks_fetch_holds_only_the_token_that_waits_for_it(oauth_cluster, keys, jwks):
    """A token with a new kid waits for the JWKS refresh, which the endpoint holds: the
    broker meanwhile answers other clients and authenticates tokens of known keys (the
    fetch runs in a worker thread, not on the event loop)."""
    import threading

    rotated = SigningKey("rsa-slow", "RS256")
    warm = _wire(oauth_cluster.oidc)  # the key set is fetched once
    assert warm.request(36, 2, {"auth_bytes": client_first(keys["rsa"].token("a"))}).error_code == 0
    warm.close()
    jwks.open.clear()
    waiting, outcome = _wire(oauth_cluster.oidc), []
    worker = threading.Thread(
        target=lambda: outcome.append(
            waiting.request(36, 2, {"auth_bytes": client_first(rotated.token("alice"))})
        )
    )
    try:
        worker.start()
        wait_until(lambda: jwks.held >= 1, what="the held JWKS fetch")
        other = WireClient.for_bootstrap(oauth_cluster.bootstrap)
        meta = other.request(3, 9, {"topics": [{"name": TOPIC}]})
        assert [t.name for t in meta.topics] == [TOPIC]
        other.close()
        known = _wire(oauth_cluster.oidc)
        resp = known.request(36, 2, {"auth_bytes": client_first(keys["ec"].token("bob"))})
        assert (resp.error_code, resp.auth_bytes) == (ErrorCode.none, b"")
        known.close()
        assert outcome == []  # still waiting for its key
        jwks.keys.append(rotated)
    finally:
        jwks.open.set()
        worker.join(60)
        waiting.close()
        if rotated in jwks.keys:
            jwks.keys.remove(rotated)
    assert (outcome[0].error_code, outcome[0].auth_bytes) == (ErrorCode.none, b"")


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x01",
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Basic abc\x01\x01",
        b"n,,\x01auth=Bearer \x01\x01",
        b"y,,\x01auth=Bearer a.b.\x01\x01",
        b"n,,\x01auth=Bearer a.b.\x01",  # no final separator
        b"n,,\x01auth=Bearer a.b.\x01k\x01\x01",  # a kvpair without '='
        b"\xff\xfe",
    ],
)
def test_malformed_client_first_messages_fail(oauth_cluster, message):
    c = _wire(oauth_cluster.unsecured)
    resp = c.request(36, 2, {"auth_bytes": message})
    assert resp.error_code == ErrorCode.sasl_authentication_failed
    c.close()


def test_an_oversized_client_first_message_closes_the_connection(oauth_cluster):
    c = _wire(oauth_cluster.unsecured)
    huge = client_first("a" * 600_000 + ".b.")  # above sasl.server.max.receive.size
    with pytest.raises((ConnectionError, OSError)):
        c.request(36, 2, {"auth_bytes": huge})
    c.close()
    ok = _wire(oauth_cluster.unsecured)
    resp = ok.request(36, 2, {"auth_bytes": client_first(unsecured_token("a", scope="kafka"))})
    assert resp.error_code == ErrorCode.none
    ok.close()


def test_kafka_python_and_aiokafka_with_a_token_provider(oauth_cluster, keys):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider as SyncTokenProvider

    class Sync(SyncTokenProvider):
        def token(self):
            return keys["rsa"].token("alice")

    class Async(AbstractTokenProvider):
        async def token(self):
            return keys["ec"].token("alice")

    auth = {
        "bootstrap_servers": oauth_cluster.oidc,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
    }
    producer = KafkaProducer(**auth, sasl_oauth_token_provider=Sync())
    first = producer.send(ACL_TOPIC, b"kafka-python").get(timeout=30)
    producer.close()

    async def send() -> int:
        p = AIOKafkaProducer(**auth, sasl_oauth_token_provider=Async())
        await p.start()
        try:
            return (await p.send_and_wait(ACL_TOPIC, b"aiokafka")).offset
        finally:
            await p.stop()

    assert asyncio.run(send()) == first.offset + 1


def test_quill_cli_command_config_with_unsecured_tokens(oauth_cluster, tmp_path):
    props = tmp_path / "oauth.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.oauthbearer.config=principal=alice scope=kafka\n"
    )
    run = tool("topics", oauth_cluster.unsecured, f"--list --command-config {props}")
    assert run.code == 0, run.err
    assert TOPIC in run.lines and ACL_TOPIC in run.lines
    # without the scope the listener requires: the broker refuses the token
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.oauthbearer.config=principal=alice\n"
    )
    run = tool("topics", oauth_cluster.unsecured, f"--list --command-config {props}")
    assert run.code == 1 and "SASL_AUTHENTICATION_FAILED" in run.err, run.err


def test_brokers_replicate_over_an_oauthbearer_inter_broker_listener(cluster_factory):
    """Two brokers talk OAUTHBEARER (unsecured tokens for User:broker, from the
    listener's JAAS options) on INTERNAL, re-authenticating every 3 s: an ISR of two
    takes acks=all writes."""
    two = cluster_factory(
        2,
        **{
            **internal_listener(2)[0],
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
            "listener.name.internal.oauthbearer.sasl.jaas.config": jaas(
                OAUTH_JAAS, unsecuredLoginStringClaim_sub="broker"
            ),
            "listener.name.internal.connections.max.reauth.ms": "3000",
            "quill.metrics.port": "free",
        },
    )
    name = "oauth-replicated"
    w = WireClient.for_bootstrap(two.bootstrap)
    assert w.create_topic(name, 1, {"min.insync.replicas": "2"}, rf=2).error_code == 0
    meta = w.request(3, 9, {"topics": [{"name": name}]})
    w.close()
    zk = two.zk_client()
    path = f"/brokers/topics/{name}/partitions/0/state"

    def isr() -> list[int]:
        return sorted(json.loads(zk.get(path)[0])["isr"]) if zk.exists(path) else []

    wait_until(lambda: isr() == [1, 2], what="an ISR of two")
    leader = two.broker(meta.topics[0].partitions[0].leader_id)
    c = WireClient("127.0.0.1", leader.port)
    try:
        for offset in range(5):
            batch = build_batch([(None, b"v%d" % offset, [], int(time.time() * 1000))])
            r = c.produce(name, 0, batch, acks=-1)
            assert (r.error_code, r.base_offset) == (0, offset)
        labels = {"listener": "INTERNAL", "networkProcessor": "0"}
        reauths = "kafka_server_socket_server_metrics_successful_reauthentication_total"
        wait_until(
            lambda: value(leader.metrics_port, reauths, **labels) >= 1,
            what="the follower's re-authentication",
        )
        r = c.produce(name, 0, build_batch([(None, b"late", [], 0)]), acks=-1)
        assert (r.error_code, r.base_offset) == (0, 5)
    finally:
        c.close()
    assert isr() == [1, 2]
