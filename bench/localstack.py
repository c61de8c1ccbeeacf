"""ZooKeeper and brokers in a temp dir for benchmarks, built as quill-stack builds them."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass
class LocalCluster:
    bootstrap: str
    zk_connect: str
    brokers: dict[int, object] = field(default_factory=dict)  # id -> ManagedProcess
    ports: dict[int, int] = field(default_factory=dict)


_RUN_FROM = (
    "import runpy, sys; sys.path.insert(0, {src!r}); sys.argv[0] = 'broker'; "
    "runpy.run_module('broker', run_name='__main__', alter_sys=True)"
)


@contextlib.contextmanager
def local_cluster(
    n_brokers: int = 1,
    overrides: dict | None = None,
    event_loop: str | None = None,
    src: Path | None = None,
    prelude: str = "",
):
    """``src``: run the brokers from another source tree (e.g. an older commit exported
    for a before/after benchmark) instead of this one. An override whose value is
    callable gets ``value(broker_id, port)``: per-broker listeners, say. ``prelude``: Python
    statements each broker process runs before the broker (bench/call_counts.py's hook)."""
    from kazoo.client import KazooClient

    from quill_stack import ports, services
    from quill_stack.process import ManagedProcess
    from quill_stack.state import owner_env

    state = Path(tempfile.mkdtemp(prefix="quill-bench-"))
    started: list = []
    try:
        zk_port = ports.free_port()
        zk = ManagedProcess(services.zookeeper_spec(state, zk_port), owner_env(state))
        started.append(zk)
        zk.start()
        zk.wait_healthy()
        client = KazooClient(hosts=f"127.0.0.1:{zk_port}", timeout=10)
        client.start(timeout=10)
        client.ensure_path("/quill-bench")
        client.stop()
        client.close()
        zk_connect = f"127.0.0.1:{zk_port}/quill-bench"
        cluster = LocalCluster("", zk_connect)
        for broker_id, port in enumerate(ports.free_ports(n_brokers), start=1):
            mine = {
                k: v(broker_id, port) if callable(v) else v for k, v in (overrides or {}).items()
            }
            spec = services.broker_spec(
                state, broker_id, port, zk_connect, n_brokers, overrides=mine
            )
            if event_loop:
                spec.env["QUILL_EVENT_LOOP"] = event_loop
            if (
                src is not None or prelude
            ):  # its own tree first on sys.path, ahead of the editable install
                run = prelude + "; " + _RUN_FROM.format(src=str(src or ROOT))
                spec.argv = [spec.argv[0], "-c", run.lstrip("; "), *spec.argv[3:]]
            proc = ManagedProcess(spec, owner_env(state))
            started.append(proc)
            proc.start()
            cluster.brokers[broker_id] = proc
            cluster.ports[broker_id] = port
        for proc in cluster.brokers.values():
            proc.wait_healthy()
        cluster.bootstrap = ",".join(f"127.0.0.1:{p}" for p in cluster.ports.values())
        yield cluster
    finally:
        for proc in reversed(started):
            proc.stop()
        shutil.rmtree(state, ignore_errors=True)


def console_client(cluster: LocalCluster):
    """Django set up for the console pointed at `cluster` (no Redis: the monitor's
    history reads fail fast), migrated, and a test client logged in as a superuser."""
    import os

    os.environ.update(
        QUILL_BOOTSTRAP_SERVERS=cluster.bootstrap,
        QUILL_ZOOKEEPER_CONNECT=cluster.zk_connect,
        QUILL_STATE_DIR=tempfile.mkdtemp(prefix="quill-bench-console-"),
        QUILL_REDIS_URL="redis://127.0.0.1:1/0",
        QUILL_ALLOWED_HOSTS="testserver",
        DJANGO_SETTINGS_MODULE="console.settings",
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", "", "pw"))
    return client


def emit(results: dict, json_path: str | None) -> int:
    """Print a benchmark's results as JSON (and write them to ``json_path``); exit code."""
    import json

    text = json.dumps(results, indent=2)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n")
    return 0
