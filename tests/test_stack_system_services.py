"""A fresh Debian machine where installing redis-server started the system's own Redis
on 6379 (and something holds ZooKeeper's 2181): `quill-stack up` with the default ports
moves its ZooKeeper and Redis to the next free ports, says which, and leaves the system
service alone. The default ports are those of the machine, so the scenario runs in a
network namespace of its own (`unshare --map-root-user --net`): a real redis-server on
6379 there, a listener on 2181, then up, status, PING on the new port, down."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from quill_stack.services import PROJECT_ROOT

SCENARIO = r"""
set -u
ip link set lo up
redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    > "$QUILL_STATE_DIR/../system-redis.log" 2>&1 &
SYSTEM_REDIS=$!
"$PY" -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 2181)); s.listen(); time.sleep(600)' &
SQUATTER=$!
for _ in $(seq 100); do redis-cli -p 6379 ping >/dev/null 2>&1 && break; sleep 0.2; done
echo "system-redis-pid $SYSTEM_REDIS"
"$PY" -m quill_stack up --services zookeeper,redis; echo "up-exit $?"
"$PY" -m quill_stack status >/dev/null; echo "status-exit $?"
echo "status-json $(tr -d '\n' < "$QUILL_STATE_DIR/status.json")"
echo "stack-redis $(redis-cli -p 6380 ping)"
echo "zk $(printf ruok | "$PY" -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", 2182)); s.sendall(b"ruok"); print(s.recv(4).decode())')"
"$PY" -m quill_stack down; echo "down-exit $?"
echo "system-redis-after $(redis-cli -p 6379 ping)"
kill "$SYSTEM_REDIS" "$SQUATTER"
wait
"""


def test_up_moves_off_ports_held_by_system_services(tmp_path):
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUILL_")}
    env.update(QUILL_STATE_DIR=str(state_dir), QUILL_BROKERS="0", PY=sys.executable)
    run = subprocess.run(
        ["unshare", "--map-root-user", "--net", "bash", "-c", SCENARIO],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    system_pid = lines["system-redis-pid"]
    assert lines["up-exit"] == "0", out + run.stderr
    assert f"port 6379 is held by pid {system_pid} (redis-server" in out
    assert "the system's own Redis service" in out and "uses port 6380 instead" in out
    assert "port 2181 is held by pid" in out and "zookeeper uses port 2182 instead" in out
    assert lines["status-exit"] == "0"
    config = json.loads(lines["status-json"])["config"]
    assert (config["zk_port"], config["redis_port"]) == (2182, 6380)
    assert lines["stack-redis"] == "PONG" and lines["zk"] == "imok"
    assert lines["down-exit"] == "0"
    assert lines["system-redis-after"] == "PONG"  # the system's service was left alone
