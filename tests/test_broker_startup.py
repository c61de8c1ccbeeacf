"""Start-up refusals: a duplicate broker.id, bad configuration, a locked log dir."""

from __future__ import annotations

import subprocess
import sys

from quill_stack import ports


def _run_broker(tmp_path, *overrides: str, timeout: float = 60) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "broker"]
    for item in overrides:
        args += ["--override", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def test_duplicate_broker_id_is_refused(cluster_factory, tmp_path):
    cluster = cluster_factory(1, **{"zookeeper.session.timeout.ms": "2000"})
    port = ports.free_port()
    result = _run_broker(
        tmp_path,
        "broker.id=1",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={tmp_path / 'data'}",
        f"zookeeper.connect={cluster.zk_connect}",
        "zookeeper.session.timeout.ms=2000",
    )
    assert result.returncode == 2
    assert "broker.id 1 is already registered" in result.stderr
    assert cluster.brokers[0].alive()


def test_bad_config_names_the_key(tmp_path):
    result = _run_broker(
        tmp_path, "broker.id=1", "zookeeper.connect=127.0.0.1:1", "log.segment.bytes=lots"
    )
    assert result.returncode == 2
    assert "log.segment.bytes" in result.stderr and "lots" in result.stderr
    result = _run_broker(tmp_path, "broker.id=1")
    assert result.returncode == 2 and "zookeeper.connect" in result.stderr


def test_locked_log_dir_is_refused(cluster_factory, tmp_path):
    cluster = cluster_factory(1)
    port = ports.free_port()
    result = _run_broker(
        tmp_path,
        "broker.id=9",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={cluster.brokers[0].log_dir}",
        f"zookeeper.connect={cluster.zk_connect}",
    )
    assert result.returncode == 2
    assert ".lock" in result.stderr


def test_replica_selector_we_do_not_have_is_refused(tmp_path):
    """replica.selector.class names a Java class: only the ones Quill has are taken."""
    result = _run_broker(
        tmp_path,
        "broker.id=1",
        "zookeeper.connect=127.0.0.1:1",
        "replica.selector.class=com.example.NearestReplicaSelector",
    )
    assert result.returncode == 2
    assert "replica.selector.class" in result.stderr
    assert "com.example.NearestReplicaSelector" in result.stderr
    assert "org.apache.kafka.common.replica.RackAwareReplicaSelector" in result.stderr
