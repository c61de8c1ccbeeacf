"""quill-configs --entity-type users end to end, as an operator types it: SCRAM credentials
added, described (mechanisms and iterations, never a secret), deleted; user quotas beside
them; Kafka's refusals for bad input. The broker also has a SASL_PLAINTEXT listener: a
user made with quill-configs logs in with confluent-kafka at once, and no longer can
after --delete-config; quill-configs itself works as that user with --command-config."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from broker.security.scram_credentials import credentials_in

from .cli_helpers import cli, tool
from .security_helpers import sasl_listener_cluster


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return sasl_listener_cluster(cluster_factory, "SCRAM-SHA-256,SCRAM-SHA-512")


def _configs(broker, command: str):
    return tool("configs", broker.bootstrap, command)


def _user_znode(broker, user: str) -> dict:
    data, _ = broker.zk_client().get(f"/config/users/{user}")
    return json.loads(data)["config"]


def test_add_describe_and_delete_scram_credentials(broker):
    user = f"alice-{uuid.uuid4().hex[:6]}"
    run = _configs(
        broker,
        "--alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret],"
        f"SCRAM-SHA-256=[password=alice-secret]' --entity-type users --entity-name {user}",
    )
    assert (run.code, run.out, run.err) == (0, f"Completed updating config for user {user}.\n", "")
    stored = credentials_in(_user_znode(broker, user))
    assert {m: c.iterations for m, c in stored.items()} == {
        "SCRAM-SHA-512": 8192,
        "SCRAM-SHA-256": 4096,
    }

    run = _configs(broker, f"--describe --entity-type users --entity-name {user}")
    assert run.code == 0, run.err
    assert run.lines == [
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192"
    ]
    run = _configs(broker, "--describe --entity-type users")
    assert run.code == 0, run.err
    assert (
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192"
    ) in run.lines
    assert "alice-secret" not in run.out

    run = _configs(
        broker, f"--alter --delete-config SCRAM-SHA-512 --entity-type users --entity-name {user}"
    )
    assert (run.code, run.err) == (0, "")
    assert set(_user_znode(broker, user)) == {"SCRAM-SHA-256"}
    run = _configs(
        broker, f"--alter --delete-config SCRAM-SHA-512 --entity-type users --entity-name {user}"
    )
    assert run.code == 1
    assert "RESOURCE_NOT_FOUND" in run.err
    assert "Attempt to delete a user credential that does not exist" in run.err

    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    run = _configs(broker, f"--describe --entity-type users --entity-name {nobody}")
    assert (run.code, run.lines) == (
        0,
        [
            f"Error retrieving SCRAM credential configs for user-principal '{nobody}': "
            f"RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: "
            f"{nobody}"
        ],
    )


def test_user_quotas_beside_credentials(broker):
    user = f"bob-{uuid.uuid4().hex[:6]}"
    run = _configs(
        broker,
        f"--alter --add-config producer_byte_rate=1024 --entity-type users --entity-name {user}",
    )
    assert (run.code, run.err) == (0, "")
    run = _configs(
        broker,
        "--alter --add-config SCRAM-SHA-256=[password=pw] "
        f"--entity-type users --entity-name {user}",
    )
    assert (run.code, run.err) == (0, "")
    assert set(_user_znode(broker, user)) == {"producer_byte_rate", "SCRAM-SHA-256"}
    run = _configs(broker, f"--describe --entity-type users --entity-name {user}")
    assert run.lines == [
        f"Quota configs for user-principal '{user}' are producer_byte_rate=1024.0",
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096",
    ]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            "--add-config SCRAM-SHA-512=[iterations=100,password=x]",
            "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-512",
        ),
        (
            "--add-config SCRAM-SHA-512=[iterations=99999,password=x]",
            "UNACCEPTABLE_CREDENTIAL: Too many iterations",
        ),
        (
            "--add-config SCRAM-SHA-512=[secret=x]",
            "Invalid credential property SCRAM-SHA-512=secret=x",
        ),
        (
            "--add-config SCRAM-SHA-1=[password=x]",
            "Unexpected config names: SCRAM-SHA-1",
        ),
        (
            "--add-config SCRAM-SHA-256=[password=x],producer_byte_rate=10",
            "Cannot alter both quota and SCRAM credential configs simultaneously",
        ),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(broker, command, message):
    user = f"carol-{uuid.uuid4().hex[:6]}"
    run = _configs(broker, f"--alter {command} --entity-type users --entity-name {user}")
    assert run.code == 1
    assert message in run.err
    assert broker.zk_client().exists(f"/config/users/{user}") is None


def _sasl(broker, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {
        "bootstrap.servers": broker.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _logs_in(conf: dict, timeout: float = 30.0) -> bool:
    """True once the client reads metadata over SASL; False on an authentication
    failure (librdkafka's _AUTHENTICATION error)."""
    errors: list = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
        try:
            producer.list_topics(timeout=1)
            return True
        except Exception:  # not yet: the connection is still being set up
            producer.poll(0.2)
    raise AssertionError(f"neither a login nor a refusal within {timeout}s: {errors}")


def _settles(conf: dict, expected: bool, timeout: float = 60.0) -> bool:
    """The login result once the brokers have picked up the change (a change
    notification away): retried until it is ``expected`` or the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        got = _logs_in(conf)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_a_user_made_with_quill_configs_logs_in_until_deleted(broker, tmp_path):
    user = f"dave-{uuid.uuid4().hex[:6]}"
    run = _configs(
        broker,
        "--alter --add-config 'SCRAM-SHA-512=[iterations=8192,password=dave-secret]' "
        f"--entity-type users --entity-name {user}",
    )
    assert (run.code, run.err) == (0, "")
    assert _settles(_sasl(broker, user, "dave-secret"), True)
    assert not _logs_in(_sasl(broker, user, "not-daves"))

    # the tool itself as that user, over SASL, from a client properties file
    props = tmp_path / "dave.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username={user}\nsasl.password=dave-secret\n"
    )
    run = cli(
        "configs",
        "--bootstrap-server",
        broker.sasl_bootstrap,
        "--command-config",
        str(props),
        "--alter",
        "--add-config",
        "SCRAM-SHA-256=[password=dave-256]",
        "--entity-type",
        "users",
        "--entity-name",
        user,
    )
    assert (run.code, run.err) == (0, "")
    assert _settles(_sasl(broker, user, "dave-256", "SCRAM-SHA-256"), True)

    run = _configs(
        broker, f"--alter --delete-config SCRAM-SHA-512 --entity-type users --entity-name {user}"
    )
    assert (run.code, run.err) == (0, "")
    assert not _settles(_sasl(broker, user, "dave-secret"), False)
    assert _logs_in(_sasl(broker, user, "dave-256", "SCRAM-SHA-256"))
    admin = AdminClient(_sasl(broker, user, "dave-256", "SCRAM-SHA-256"))
    described = admin.describe_user_scram_credentials([user])[user].result(timeout=30)
    assert [i.iterations for i in described.scram_credential_infos] == [4096]


def test_the_controller_tools_connect_with_command_config(broker, tmp_path):
    """quill-configs' quota path, quill-leader-election and quill-reassign-partitions talk
    to the controller directly: over SASL with their client properties file; an unknown
    security key is named."""
    user = f"erin-{uuid.uuid4().hex[:6]}"
    run = _configs(
        broker,
        f"--alter --add-config SCRAM-SHA-256=[password=erin-pw] --entity-type users --entity-name {user}",
    )
    assert run.code == 0, run.err
    assert _settles(_sasl(broker, user, "erin-pw", "SCRAM-SHA-256"), True)
    props = tmp_path / "erin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username={user}\nsasl.password=erin-pw\n"
    )
    sasl = ("--bootstrap-server", broker.sasl_bootstrap, "--command-config", str(props))
    run = cli(
        "configs", *sasl, "--alter", "--add-config", "consumer_byte_rate=2048",
        "--entity-type", "users", "--entity-name", user,
    )  # fmt: skip
    assert (run.code, run.err) == (0, "")
    run = cli("configs", *sasl, "--describe", "--entity-type", "users", "--entity-name", user)
    assert run.lines == [
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0",
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096",
    ], run.err
    run = cli("reassign_partitions", *sasl, "--list")
    assert run.code == 0, run.err
    admin_config = ("--bootstrap-server", broker.sasl_bootstrap, "--admin.config", str(props))
    run = cli(  # Kafka's kafka-leader-election names it --admin.config
        "leader_election", *admin_config, "--election-type", "PREFERRED", "--all-topic-partitions"
    )
    assert run.code == 0, run.err

    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_PLAINTEXT\nsasl.kerberos.service.name=kafka\n")
    run = cli("leader_election", "--bootstrap-server", broker.sasl_bootstrap,
              "--admin.config", str(bad), "--election-type", "PREFERRED",
              "--all-topic-partitions")  # fmt: skip
    assert run.code == 1
    assert "sasl.kerberos.service.name" in run.err
