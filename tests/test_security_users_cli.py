"""quill-configs --entity-type users end to end, as an operator types it: SCRAM credentials
added, described (mechanisms and iterations, never a secret), deleted; user quotas beside
them; Kafka's refusals for bad input."""

from __future__ import annotations

import json
import uuid

import pytest

from broker.security.scram_credentials import credentials_in

from .cli_helpers import tool


@pytest.fixture(scope="module")
def broker(cluster_factory):
    return cluster_factory(1)


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
