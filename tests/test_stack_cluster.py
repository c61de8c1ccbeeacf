"""The test fixtures themselves: session ZooKeeper/Redis and the broker cluster factory."""

from __future__ import annotations

import json
import signal

from quill_stack import health


def test_session_zookeeper_and_redis_answer(zookeeper, redis_server):
    assert health.zookeeper(zookeeper.host, zookeeper.port) == (True, "imok")
    assert "Mode: standalone" in health.zk_command(zookeeper.host, zookeeper.port, "srvr")
    assert health.redis(redis_server.host, redis_server.port) == (True, "PONG")


def test_clusters_register_in_their_own_chroot(cluster):
    first, second = cluster(2), cluster(1, log_segment_bytes=1048576)
    assert health.registered_broker_ids(first.zk_connect) == {1, 2}
    assert health.registered_broker_ids(second.zk_connect) == {1}
    assert first.zk_connect != second.zk_connect
    assert first.bootstrap == ",".join(f"127.0.0.1:{b.port}" for b in first.brokers)

    data, _ = health.broker_registration(first.zk_connect, 2)
    assert data["endpoints"] == [f"PLAINTEXT://127.0.0.1:{first.brokers[1].port}"]
    assert (data["host"], data["port"]) == ("127.0.0.1", first.brokers[1].port)
    assert len({b.log_dir for b in first.brokers + second.brokers}) == 3
    props = (second.brokers[0].log_dir.parent / "server.properties").read_text()
    assert "log.segment.bytes=1048576" in props.splitlines()


def test_broker_kill_pause_resume_restart_stop(cluster):
    c = cluster(1)
    broker = c.brokers[0]
    address = ("127.0.0.1", broker.port)

    broker.pause()
    assert not health.api_versions(*address, timeout=1.0)[0]
    broker.resume()
    assert health.api_versions(*address)[0]

    assert broker.kill() == -signal.SIGKILL
    assert not broker.alive()
    assert not health.api_versions(*address, timeout=1.0)[0]
    broker.start()  # waits for a registration newer than the killed process's
    assert health.broker(*address, broker.id, c.zk_connect)[0]

    broker.restart()
    assert broker.stop() == 0, "SIGTERM must be a clean shutdown (exit 0)"
    assert health.registered_broker_ids(c.zk_connect) == set()


def test_broker_json_registration_is_kafkas(cluster):
    c = cluster(1)
    data, _ = health.broker_registration(c.zk_connect, 1)
    json.dumps(data)
    assert {"endpoints", "host", "port"} <= set(data)
