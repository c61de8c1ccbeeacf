"""Rolling restart and decommission through the real supervisor: `quill-stack up` runs
ZooKeeper, Redis, three brokers, the console and the Celery worker; the worker restarts brokers with
`quill-stack restart broker-N` (the local driver). Under an acks=all producer every
broker's pid changes, the controller's last, and nothing acknowledged is lost; the
availability gate refuses when a topic with RF 2 and min.insync.replicas 2 would go
under min ISR, and nothing is restarted; a decommission drains broker 3 and stops it
(`quill-stack stop broker-3`)."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from quill_stack import ports
from quill_stack.services import PROJECT_ROOT, PYTHON
from tests.cluster_helpers import BackgroundProducer
from tests.ops_stack_helpers import TOKEN_SCRIPT, read_all, unique
from tests.stack_helpers import quill_stack, service_entry, stack_env
from tests.wait_helpers import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def three_free_ports() -> int:
    """A base port with base + 1 and base + 2 free too (brokers 1-3 listen there)."""
    for _ in range(200):
        base = ports.free_port()
        if not any(ports.port_in_use(base + i) for i in (1, 2)):
            return base
    raise AssertionError("no three consecutive free ports")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("ops-restart")
    env = stack_env(state_dir, QUILL_BROKERS="3", QUILL_BROKER_BASE_PORT=str(three_free_ports()))
    up = quill_stack(env, "up", timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        script = TOKEN_SCRIPT.format(name="roller", password="pw-roller-1", role="admin")
        made = subprocess.run(
            [PYTHON, "manage.py", "shell", "-c", script],
            cwd=PROJECT_ROOT,
            env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        token = made.stdout.split()[-1]
        base = int(env["QUILL_BROKER_BASE_PORT"])
        yield {
            "env": env,
            "state_dir": state_dir,
            "token": token,
            "url": f"http://127.0.0.1:{env['QUILL_CONSOLE_PORT']}/api",
            "bootstrap": ",".join(f"127.0.0.1:{base + i}" for i in range(3)),
        }
    finally:
        down = quill_stack(env, "down", timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr


def call(stack, method, path, body=None):
    request = urllib.request.Request(
        stack["url"] + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {stack['token']}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def pids(stack) -> dict[int, int]:
    return {b: service_entry(stack["state_dir"], f"broker-{b}").get("pid") for b in (1, 2, 3)}


def ended(stack, op_id, timeout=600) -> dict:
    def done():
        op = call(stack, "GET", f"/operations/{op_id}")[1]
        return op if op["state"] in ("succeeded", "failed", "cancelled") else None

    return wait_until(done, timeout, f"operation {op_id} to end", 1.0)


def create(stack, topic, rf, min_isr):
    """The topic, once every partition has a leader and all its replicas in sync."""
    admin = AdminClient({"bootstrap.servers": stack["bootstrap"]})
    new = NewTopic(topic, 3, rf, config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([new])[topic].result(30)

    def settled() -> bool:
        found = admin.list_topics(topic, timeout=10).topics[topic]
        parts = found.partitions.values()
        return (
            found.error is None
            and len(parts) == 3
            and all(p.leader >= 0 and sorted(p.isrs) == sorted(p.replicas) for p in parts)
        )

    wait_until(settled, 60, f"{topic}'s replicas in sync", 0.2)


def delete(stack, topic) -> None:
    """The topic deleted, and gone from the metadata."""
    admin = AdminClient({"bootstrap.servers": stack["bootstrap"]})
    admin.delete_topics([topic])[topic].result(30)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 60, f"{topic} gone")


def test_decommission_drains_the_broker_then_stops_it(stack):
    """First in the module, while every topic has RF 2 at most; broker 3 is started
    again at the end for the tests that follow."""
    topic = unique("drain")
    create(stack, topic, 2, 1)
    status, started = call(stack, "POST", "/operations", {"kind": "decommission", "broker": 3})
    assert status == 202, started
    op = ended(stack, started["id"])
    assert op["state"] == "succeeded", (op["error"], op["steps"][-6:])
    assert op["result"]["stopped"] is True
    admin = AdminClient({"bootstrap.servers": stack["bootstrap"]})
    placed = admin.list_topics(topic, timeout=30).topics[topic].partitions
    assert all(3 not in p.replicas for p in placed.values())
    wait_until(
        lambda: 3 not in admin.list_topics(timeout=10).brokers, 60, "broker 3 out of the metadata"
    )
    again = quill_stack(stack["env"], "start", "broker-3", timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    wait_until(lambda: 3 in admin.list_topics(timeout=10).brokers, 60, "broker 3 back")
    delete(stack, topic)


def test_the_gate_refuses_when_a_topic_would_go_under_min_isr(stack):
    topic = unique("gate")
    create(stack, topic, 2, 2)
    before = pids(stack)
    status, started = call(
        stack, "POST", "/operations", {"kind": "rolling-restart", "gate_timeout_s": 1}
    )
    assert status == 202, started
    op = ended(stack, started["id"])
    assert op["state"] == "failed"
    assert "would leave it under min ISR" in op["error"] and "Restarted so far: none" in op["error"]
    assert pids(stack) == before
    delete(stack, topic)


def test_rolling_restart_changes_every_pid_controller_last_nothing_lost(stack):
    topic = unique("roll")
    create(stack, topic, 3, 2)
    producer = BackgroundProducer(stack["bootstrap"], topic, partitions=3)
    producer.start()
    try:
        wait_until(lambda: len(producer.all_acked()) > 100, 60, "records acknowledged")
        before = pids(stack)
        status, started = call(stack, "POST", "/operations", {"kind": "rolling-restart"})
        assert status == 202, started
        op = ended(stack, started["id"])
        assert op["state"] == "succeeded", (op["error"], op["steps"][-6:])
    finally:
        producer.stop(120)
    after = pids(stack)
    assert all(after[b] != before[b] for b in (1, 2, 3)), (before, after)
    order = [r["broker"] for r in op["result"]["restarted"]]
    assert sorted(order) == [1, 2, 3]
    assert f"controller {order[-1]} last" in op["steps"][1]["message"]
    assert not producer.failures
    stored = read_all(stack["bootstrap"], topic, 3)
    for p in range(3):
        assert not set(producer.acked[p]) - set(stored[p])
