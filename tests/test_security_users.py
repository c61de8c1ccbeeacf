"""DescribeUserScramCredentials (50) / AlterUserScramCredentials (51) on the wire (kio)
and through confluent-kafka's AdminClient: the bytes in ``/config/users/<user>`` are
Kafka's, the stored credential verifies the password in a real SCRAM exchange (scramp),
Describe shows no secret, and bad input gets Kafka's per-user error codes."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import uuid

import pytest
import scramp

from broker.protocol.errors import ErrorCode
from broker.security.scram_credentials import credentials_in

from .scram_helpers import scram_login
from .wire import WireClient

SHA256, SHA512 = 1, 2


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


@pytest.fixture
def wire(broker):
    w = WireClient.for_bootstrap(broker.bootstrap)
    yield w
    w.close()


@pytest.fixture(scope="module")
def zk(broker):
    return broker.zk_client()


def _user() -> str:
    return f"u-{uuid.uuid4().hex[:8]}"


def _upsertion(name, password="secret", mechanism=SHA512, iterations=4096, salt=None):
    salt = os.urandom(24) if salt is None else salt
    algo = {SHA256: "sha256", SHA512: "sha512"}.get(mechanism, "sha256")
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, max(iterations, 1))
    return {
        "name": name,
        "mechanism": mechanism,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted,
    }


def _alter(wire, upsertions=(), deletions=()):
    resp = wire.request(
        51,
        0,
        {
            "upsertions": list(upsertions),
            "deletions": [{"name": n, "mechanism": m} for n, m in deletions],
        },
    )
    return [(r.user, r.error_code, r.error_message) for r in resp.results]


def _describe(wire, users):
    body = {"users": None if users is None else [{"name": u} for u in users]}
    resp = wire.request(50, 0, body)
    assert resp.error_code == ErrorCode.none
    return {
        r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in resp.results
    }


def _znode(zk, path) -> dict:
    data, _ = zk.get(path)
    return json.loads(data)


def test_upsert_writes_kafkas_format_beside_quotas_and_verifies_the_password(broker, wire, zk):
    user = _user()
    quota = wire.request(
        49,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": user}],
                    "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                }
            ],
            "validate_only": False,
        },
    )
    assert quota.entries[0].error_code == ErrorCode.none
    salt = b"0123456789abcdef"
    up = _upsertion(user, "alice-secret", SHA512, 8192, salt)
    assert _alter(wire, [up]) == [(user, ErrorCode.none, None)]

    stored = _znode(zk, f"/config/users/{user}")
    assert stored["version"] == 1
    assert set(stored["config"]) == {"producer_byte_rate", "SCRAM-SHA-512"}
    assert stored["config"]["producer_byte_rate"] == "1024"
    fields = dict(kv.split("=", 1) for kv in stored["config"]["SCRAM-SHA-512"].split(","))
    assert list(fields) == ["salt", "stored_key", "server_key", "iterations"]
    assert fields["salt"] == "MDEyMzQ1Njc4OWFiY2RlZg=="  # base64 of the salt the client sent
    assert fields["iterations"] == "8192"
    # stored_key = H(HMAC(salted, "Client Key")), as Kafka's ScramFormatter
    client_key = hmac.digest(up["salted_password"], b"Client Key", "sha512")
    assert base64.b64decode(fields["stored_key"]) == hashlib.sha512(client_key).digest()
    server_key = hmac.digest(up["salted_password"], b"Server Key", "sha512")
    assert base64.b64decode(fields["server_key"]) == server_key
    assert b"alice-secret" not in zk.get(f"/config/users/{user}")[0]

    credential = credentials_in(stored["config"])["SCRAM-SHA-512"]
    scram_login(credential, user, "alice-secret")
    with pytest.raises(scramp.ScramException):
        scram_login(credential, user, "wrong-password")

    notices = [zk.get(f"/config/changes/{c}")[0] for c in zk.get_children("/config/changes")]
    assert f'{{"version":2,"entity_path":"users/{user}"}}'.encode() in notices


def test_describe_shows_mechanisms_and_iterations_only(wire):
    a, b = _user(), _user()
    assert _alter(wire, [_upsertion(a, mechanism=SHA256, iterations=4096)]) == [
        (a, ErrorCode.none, None)
    ]
    assert _alter(
        wire, [_upsertion(b, mechanism=SHA512, iterations=10000), _upsertion(b, mechanism=SHA256)]
    ) == [(b, ErrorCode.none, None)]
    assert _describe(wire, [b, a]) == {
        b: (ErrorCode.none, [(SHA256, 4096), (SHA512, 10000)]),
        a: (ErrorCode.none, [(SHA256, 4096)]),
    }
    everyone = _describe(wire, None)
    assert everyone[a] == (ErrorCode.none, [(SHA256, 4096)])
    assert list(everyone) == sorted(everyone)  # all users, sorted, as Kafka
    assert _describe(wire, []) == everyone


def test_delete_removes_only_that_mechanism_and_keeps_quotas(wire, zk):
    user = _user()
    ups = [_upsertion(user, mechanism=SHA256), _upsertion(user, mechanism=SHA512)]
    assert _alter(wire, ups) == [(user, ErrorCode.none, None)]
    assert _alter(wire, deletions=[(user, SHA256)]) == [(user, ErrorCode.none, None)]
    assert set(_znode(zk, f"/config/users/{user}")["config"]) == {"SCRAM-SHA-512"}
    assert _alter(wire, deletions=[(user, SHA512)]) == [(user, ErrorCode.none, None)]
    assert _znode(zk, f"/config/users/{user}")["config"] == {}
    assert user not in _describe(wire, None)


def test_user_names_are_sanitized_in_the_znode_path(wire, zk):
    user = f"CN=app {uuid.uuid4().hex[:4]},O=quill*"
    assert _alter(wire, [_upsertion(user)]) == [(user, ErrorCode.none, None)]
    sanitized = user.replace("=", "%3D").replace(" ", "%20").replace(",", "%2C")
    sanitized = sanitized.replace("*", "%2A")
    assert "SCRAM-SHA-512" in _znode(zk, f"/config/users/{sanitized}")["config"]
    assert _describe(wire, None)[user] == (ErrorCode.none, [(SHA512, 4096)])


def test_bad_alterations_get_kafkas_codes_and_change_nothing(wire, zk):
    ok, few, many, mech, dup, gone = (_user() for _ in range(6))
    assert _alter(wire, [_upsertion(ok)]) == [(ok, ErrorCode.none, None)]
    before = zk.get(f"/config/users/{ok}")[0]
    results = _alter(
        wire,
        [
            _upsertion(""),
            _upsertion(few, iterations=4095),
            _upsertion(many, iterations=16385),
            _upsertion(mech, mechanism=3),
            _upsertion(dup),
            _upsertion(dup),
            _upsertion(ok, iterations=100),  # makes ok's valid deletion below void too
        ],
        deletions=[(ok, SHA512), (gone, SHA256)],
    )
    assert sorted(results) == sorted(
        [
            ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
            (few, ErrorCode.unacceptable_credential, "Too few iterations"),
            (many, ErrorCode.unacceptable_credential, "Too many iterations"),
            (mech, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
            (ok, ErrorCode.unacceptable_credential, "Too few iterations"),
            (
                dup,
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            ),
            (
                gone,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            ),
        ]
    )
    assert zk.get(f"/config/users/{ok}")[0] == before
    for user in (few, many, mech, dup, gone):
        assert zk.exists(f"/config/users/{user}") is None
    # an upsertion and a deletion of the same mechanism is a duplicate too
    assert _alter(wire, [_upsertion(ok)], deletions=[(ok, SHA512)]) == [
        (
            ok,
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        )
    ]
    empty_salt = {**_upsertion(dup), "salt": b""}
    assert _alter(wire, [empty_salt]) == [
        (dup, ErrorCode.unacceptable_credential, "Salt must not be empty")
    ]
    assert zk.get(f"/config/users/{ok}")[0] == before


def test_bad_describes_get_kafkas_codes(wire):
    ok, missing = _user(), _user()
    _alter(wire, [_upsertion(ok)])
    resp = wire.request(50, 0, {"users": [{"name": n} for n in (ok, missing, "", ok)]})
    assert resp.error_code == ErrorCode.none
    got = [(r.user, r.error_code, r.error_message, len(r.credential_infos)) for r in resp.results]
    assert got == [
        (
            ok,
            ErrorCode.duplicate_resource,
            f"Cannot describe SCRAM credentials for the same user twice in a single request: {ok}",
            0,
        ),
        (
            missing,
            ErrorCode.resource_not_found,
            f"Attempt to describe a user credential that does not exist: {missing}",
            0,
        ),
        (
            "",
            ErrorCode.resource_not_found,
            "Username must not be empty",
            0,
        ),
    ]


def test_confluent_kafka_admin_client_alters_and_describes(broker, zk):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    user = _user()
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 5000)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, b"bob-secret", b"some-salt-16byte")]
    )
    assert futures[user].result(timeout=30) is None
    credential = credentials_in(_znode(zk, f"/config/users/{user}")["config"])["SCRAM-SHA-256"]
    assert (credential.salt, credential.iterations) == (b"some-salt-16byte", 5000)
    scram_login(credential, user, "bob-secret")

    described = admin.describe_user_scram_credentials([user])[user].result(timeout=30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_256, 5000)]

    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
    )
    with pytest.raises(Exception) as failure:
        futures[user].result(timeout=30)
    assert failure.value.args[0].code() == ErrorCode.resource_not_found.value
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)]
    )
    assert futures[user].result(timeout=30) is None
    assert _znode(zk, f"/config/users/{user}")["config"] == {}


def test_an_authorizer_needs_cluster_describe_and_alter(cluster_factory):
    """Over PLAINTEXT everyone is User:ANONYMOUS: 127.0.0.1 holds Cluster ALL (the
    broker's own requests need it), raw requests from 127.0.0.2 start with nothing."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    c = cluster_factory(
        1,
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true",  # the cluster's first ACL closes it
        },
    )
    admin = AdminClient({"bootstrap.servers": c.bootstrap})

    def allow(op, host):
        binding = AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:ANONYMOUS",
            host,
            op,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([binding])[binding].result(timeout=30)

    allow(AclOperation.ALL, "127.0.0.1")
    zk = c.zk_client()
    user = _user()
    outsider = WireClient.for_bootstrap(c.bootstrap, source_host="127.0.0.2")
    try:
        denied = "Cluster authorization failed."
        assert _alter(outsider, [_upsertion(user)], deletions=[("zed", SHA256)]) == [
            (user, ErrorCode.cluster_authorization_failed, denied),
            ("zed", ErrorCode.cluster_authorization_failed, denied),
        ]
        assert zk.exists(f"/config/users/{user}") is None
        resp = outsider.request(50, 0, {"users": [{"name": user}]})
        assert (resp.error_code, resp.error_message) == (
            ErrorCode.cluster_authorization_failed,
            denied,
        )
        assert [(r.user, r.error_code) for r in resp.results] == [
            (user, ErrorCode.cluster_authorization_failed)
        ]

        allow(AclOperation.DESCRIBE, "127.0.0.2")
        insider = WireClient.for_bootstrap(c.bootstrap)
        assert _alter(insider, [_upsertion(user)]) == [(user, ErrorCode.none, None)]
        insider.close()
        assert _describe(outsider, [user]) == {user: (ErrorCode.none, [(SHA512, 4096)])}
        assert _alter(outsider, deletions=[(user, SHA512)]) == [
            (user, ErrorCode.cluster_authorization_failed, denied)
        ]
        assert "SCRAM-SHA-512" in _znode(zk, f"/config/users/{user}")["config"]
    finally:
        outsider.close()


def test_alter_is_answered_by_the_controller_only(cluster_factory):
    c = cluster_factory(2)
    zk = c.zk_client()
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    other = 1 if controller == 2 else 2
    user = _user()
    w = WireClient.for_bootstrap(c.broker(other).address)
    try:
        assert _alter(w, [_upsertion(user)], deletions=[("abe", SHA256)]) == [
            (
                "abe",
                ErrorCode.not_controller,
                "This is not the correct controller for this cluster.",
            ),
            (
                user,
                ErrorCode.not_controller,
                "This is not the correct controller for this cluster.",
            ),
        ]
        assert zk.exists(f"/config/users/{user}") is None
        assert _describe(w, [user]) == {user: (ErrorCode.resource_not_found, [])}
    finally:
        w.close()
    w = WireClient.for_bootstrap(c.broker(controller).address)
    try:
        assert _alter(w, [_upsertion(user)]) == [(user, ErrorCode.none, None)]
    finally:
        w.close()
    assert "SCRAM-SHA-512" in _znode(zk, f"/config/users/{user}")["config"]
