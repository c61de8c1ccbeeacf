"""Burrow (LinkedIn's lag monitor, Debian package ``burrow``) pointed at a Quill broker
reads __consumer_offsets with Kafka's record formats and reports the group with the
same lag as ``quill-consumer-groups --describe``."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, TopicPartition

from quill_stack import ports
from tests.cli_helpers import tool
from tests.group_helpers import GROUP_BROKER, create_topic, produce, unique
from tests.wait_helpers import wait_until

BURROW = shutil.which("Burrow") or shutil.which("burrow")
pytestmark = pytest.mark.skipif(BURROW is None, reason="Burrow is not installed (apt: burrow)")

CONFIG = """
[general]
pidfile="{dir}/burrow.pid"

[logging]
filename="{dir}/burrow.log"
level="info"

[zookeeper]
servers=["{zk}"]
timeout=6
root-path="/burrow-{tag}"

[client-profile.quill]
client-id="burrow-quill"
kafka-version="{kafka_version}"

[cluster.quill]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="quill"
topic-refresh=1
offset-refresh=1

[consumer.quill]
class-name="kafka"
cluster="quill"
servers=["{bootstrap}"]
client-profile="quill"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="127.0.0.1:{http}"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
"""


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("kafka_version", ["2.0.0"])
def test_burrow_reports_the_group_and_its_lag(cluster_factory, zookeeper, tmp_path, kafka_version):
    broker = cluster_factory(1, **GROUP_BROKER)
    topic, group = unique("burrow"), unique("burrow-group")
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 30, 3)  # 10 per partition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(
        offsets=[
            TopicPartition(topic, 0, 3),
            TopicPartition(topic, 1, 10),
            TopicPartition(topic, 2, 6),
        ],
        asynchronous=False,
    )
    c.close()
    http = ports.free_port()
    config = tmp_path / "burrow.toml"
    config.write_text(
        CONFIG.format(
            dir=tmp_path, zk=zookeeper.address, tag=unique("t"), bootstrap=broker.bootstrap,
            http=http, kafka_version=kafka_version,
        )
    )  # fmt: skip
    proc = subprocess.Popen(
        [BURROW, "--config-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{http}/v3/kafka/quill"
    try:

        def lag():
            try:
                return _get(f"{base}/consumer/{group}/lag")
            except OSError:
                return None

        def ready():
            answer = lag()
            return answer is not None and not answer.get("error") and answer["status"]["partitions"]

        try:
            wait_until(ready, timeout=60, interval=0.5, what="Burrow to see the group")
        except AssertionError:
            print((tmp_path / "burrow.log").read_text()[-4000:])
            raise
        assert group in _get(f"{base}/consumer")["consumers"]
        status = lag()["status"]
        burrow_lag = {
            p["partition"]: p["current_lag"] for p in status["partitions"] if p["topic"] == topic
        }
        assert burrow_lag == {0: 7, 1: 0, 2: 4}
        assert status["totallag"] == 11
        described = tool("consumer_groups", broker.bootstrap, f"--describe --group {group}")
        rows = [line.split() for line in described.lines if line.startswith(group)]
        assert {int(r[2]): int(r[5]) for r in rows} == burrow_lag
    finally:
        proc.terminate()
        proc.wait(10)
        time.sleep(0)
