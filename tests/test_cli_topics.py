"""quill-topics and quill-configs against a real broker process."""

from __future__ import annotations

import re
import time

import pytest

from broker.cli.common import CliError
from broker.cli.configs import parse_add_config

from .cli_helpers import tool, topic_name


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


def topics(bootstrap: str, command: str):
    return tool("topics", bootstrap, command)


def configs(bootstrap: str, command: str):
    return tool("configs", bootstrap, command)


def _eventually(check, what: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout} s")


def test_create_list_describe_alter_delete(bootstrap):
    name = topic_name("cli-topic")
    run = topics(
        bootstrap,
        f"--create --topic {name} --partitions 3 --replication-factor 1 "
        "--config retention.ms=123456",
    )
    assert (run.code, run.out) == (0, f"Created topic {name}.\n"), run.err
    _eventually(lambda: name in topics(bootstrap, "--list").lines, f"{name} listed")

    run = topics(bootstrap, f"--describe --topic {name}")
    assert run.code == 0, run.err
    header, *parts = run.lines
    assert re.fullmatch(
        rf"Topic: {name}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: .*",
        header,
    ), header
    assert "retention.ms=123456" in header.split("Configs: ")[1].split(",")
    assert parts == [
        f"\tTopic: {name}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)
    ]

    again = topics(bootstrap, f"--create --topic {name} --partitions 3")
    assert again.code == 1
    assert "Error while executing topic command : TOPIC_ALREADY_EXISTS" in again.err
    assert topics(bootstrap, f"--create --topic {name} --if-not-exists").code == 0

    grow = topics(bootstrap, f"--alter --topic {name} --partitions 5")
    assert grow.code == 0, grow.err
    _eventually(
        lambda: len(topics(bootstrap, f"--describe --topic {name}").lines) == 6,
        "5 partitions described",
    )
    assert "PartitionCount: 5" in topics(bootstrap, f"--describe --topic {name}").lines[0]
    shrink = topics(bootstrap, f"--alter --topic {name} --partitions 2")
    assert shrink.code == 1
    assert "INVALID_PARTITIONS" in shrink.err

    deleted = topics(bootstrap, f"--delete --topic {name}")
    assert deleted.code == 0, deleted.err
    _eventually(lambda: name not in topics(bootstrap, "--list").lines, f"{name} gone")


def test_missing_topic_errors(bootstrap):
    name = topic_name("missing")
    run = topics(bootstrap, f"--describe --topic {name}")
    assert run.code == 1
    assert f"Topic '{name}' does not exist as expected" in run.err
    assert topics(bootstrap, f"--delete --topic {name}").code == 1
    assert topics(bootstrap, f"--delete --topic {name} --if-exists").code == 0
    assert topics(bootstrap, f"--describe --topic {name} --if-exists").code == 0


def test_bad_input_is_refused_and_creates_nothing(bootstrap):
    name = topic_name("bad-config")
    for command, error in [
        (f"--create --topic {name} --config retention.ms=soon", "INVALID_CONFIG"),
        (f"--create --topic {name} --config no-equals-sign", "INVALID_CONFIG"),
        (f"--create --topic {name} --partitions 0", "INVALID_PARTITIONS"),
        ("--create --topic bad/name --partitions 1", "INVALID_TOPIC_EXCEPTION"),
        (f"--alter --topic {name} --partitions 2", "UNKNOWN_TOPIC_OR_PARTITION"),
    ]:
        run = topics(bootstrap, command)
        assert run.code == 1, command
        assert f"Error while executing topic command : {error}" in run.err, (command, run.err)
    assert name not in topics(bootstrap, "--list").lines


def test_configs_alter_describe_delete(bootstrap):
    name = topic_name("cli-configs")
    assert topics(bootstrap, f"--create --topic {name} --partitions 1").code == 0
    entity = f"--entity-type topics --entity-name {name}"

    run = configs(
        bootstrap,
        f"{entity} --alter --add-config retention.ms=1000,cleanup.policy=[compact,delete]",
    )
    assert (run.code, run.out) == (0, f"Completed updating config for topic {name}.\n"), run.err
    assert "retention.ms=1000" in topics(bootstrap, f"--describe --topic {name}").lines[0]

    run = configs(bootstrap, f"{entity} --describe")
    assert run.code == 0, run.err
    assert run.lines[0] == f"Dynamic configs for topic {name} are:"
    shown = {line.split("=", 1)[0].strip(): line for line in run.lines[1:]}
    assert set(shown) == {"cleanup.policy", "retention.ms"}
    assert shown["cleanup.policy"].startswith("  cleanup.policy=compact,delete sensitive=false")
    # Kafka lists the topic override, then the broker's synonyms from log.retention.ms
    # on: none on a broker that does not set it
    assert shown["retention.ms"] == (
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"
    )
    assert "DEFAULT_CONFIG:log.cleanup.policy=delete}" in shown["cleanup.policy"]

    run = configs(bootstrap, f"--topic {name} --alter --delete-config retention.ms")
    assert run.code == 0, run.err
    run = configs(bootstrap, f"{entity} --describe")
    assert [line.split("=")[0].strip() for line in run.lines[1:]] == ["cleanup.policy"]

    every = configs(bootstrap, f"{entity} --describe --all")
    assert every.lines[0] == f"All configs for topic {name} are:"
    assert any(line.startswith("  segment.bytes=") for line in every.lines)


def test_configs_bad_input(bootstrap):
    name = topic_name("cli-configs-bad")
    assert topics(bootstrap, f"--create --topic {name} --partitions 1").code == 0
    entity = f"--entity-type topics --entity-name {name}"

    bad = configs(bootstrap, f"{entity} --alter --add-config retention.ms=abc")
    assert bad.code == 1
    assert "Error while executing config command with args" in bad.err
    assert "INVALID_CONFIG" in bad.err
    dynamic = configs(bootstrap, f"{entity} --describe").lines
    assert dynamic == [f"Dynamic configs for topic {name} are:"]

    unset = configs(bootstrap, f"{entity} --alter --delete-config retention.ms")
    assert unset.code == 1
    assert "Invalid config(s): retention.ms" in unset.err

    missing = configs(
        bootstrap, f"--entity-type topics --entity-name {topic_name('no')} --describe"
    )
    assert missing.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.err


def test_parse_add_config():
    assert parse_add_config("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
    with pytest.raises(CliError):
        parse_add_config("a=1,b")
