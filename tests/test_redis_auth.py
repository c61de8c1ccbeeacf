"""Redis with a password (requirepass), as the secure stack runs it, against a real
redis-server: a client without the password gets NOAUTH for everything (no Celery task
enqueued, no channel-layer message forged); the health check, redis-py and the channel
layer the console uses work with the password read from a 0600 file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis as redis_py
from channels_redis.core import RedisChannelLayer

from cluster_client import clusters
from console.channel_layer import channel_layers
from livefeed import keys
from quill_stack import health, ports, services
from quill_stack.process import ManagedProcess
from quill_stack.redis_auth import redis_url_from_env, with_password
from quill_stack.state import owner_env, write_private

PASSWORD = 'p@ss:/w rd"' + uuid.uuid4().hex[:6]  # every character a URL or redis.conf quotes


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory):
    state = tmp_path_factory.mktemp("redis-auth")
    port = ports.free_port()
    spec = services.redis_spec(state, port, password=PASSWORD)
    proc = ManagedProcess(spec, owner_env(state))
    proc.start()
    try:
        proc.wait_healthy()  # the health check logs in with the password
        secret = state / "redis.password"
        write_private(secret, PASSWORD.encode())
        yield {"port": port, "url": f"redis://127.0.0.1:{port}/0", "secret": secret, "dir": state}
    finally:
        proc.stop()


def _raw(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        return sock.recv(200)


def test_an_unauthenticated_client_gets_noauth(locked_redis):
    port = locked_redis["port"]
    assert _raw(port, b"PING\r\n").startswith(b"-NOAUTH")
    # what a forged Celery task or channel-layer message would need first
    assert _raw(port, b"LPUSH celery x\r\n").startswith(b"-NOAUTH")
    assert _raw(port, b"ZADD asgi:group:live 1 x\r\n").startswith(b"-NOAUTH")
    assert health.redis("127.0.0.1", port) == (
        False,
        "PING answered b'-NOAUTH Authentication required.\\r\\n'",
    )
    assert health.redis("127.0.0.1", port, password="wrong")[0] is False
    assert health.redis("127.0.0.1", port, password=PASSWORD) == (True, "PONG")


def test_redis_conf_and_password_file_are_private(locked_redis):
    conf = locked_redis["dir"] / "redis" / "redis.conf"
    assert conf.stat().st_mode & 0o077 == 0
    assert "requirepass" in conf.read_text()


def test_the_url_from_the_password_file_works(locked_redis):
    env = {
        "QUILL_REDIS_URL": locked_redis["url"],
        "QUILL_REDIS_PASSWORD_FILE": str(locked_redis["secret"]),
    }
    url = redis_url_from_env(env)
    assert url != locked_redis["url"]
    client = redis_py.Redis.from_url(url)
    assert client.ping() is True
    client.close()
    with pytest.raises(redis_py.AuthenticationError):
        redis_py.Redis.from_url(locked_redis["url"]).ping()
    # QUILL_REDIS_PASSWORD is the other way to give it; a URL's own password wins
    assert (
        redis_url_from_env(
            {"QUILL_REDIS_URL": locked_redis["url"], "QUILL_REDIS_PASSWORD": PASSWORD}
        )
        == url
    )
    assert with_password("redis://:own@h:1/0", PASSWORD) == "redis://:own@h:1/0"


async def test_the_channel_layer_works_with_the_password_only(locked_redis):
    url = with_password(locked_redis["url"], PASSWORD)
    layer = RedisChannelLayer(**channel_layers(url)["default"]["CONFIG"])
    channel = await layer.new_channel()
    await layer.group_add("live.test", channel)
    await layer.group_send("live.test", {"type": "live.delta", "n": 1})
    assert await layer.receive(channel) == {"type": "live.delta", "n": 1}
    await layer.flush()
    await layer.close_pools()

    forger = RedisChannelLayer(**channel_layers(locked_redis["url"])["default"]["CONFIG"])
    with pytest.raises(redis_py.exceptions.AuthenticationError):
        await forger.group_send("live.test", {"type": "live.delta", "forged": True})
    await forger.close_pools()


def _monitor_probe(locked_redis, **env) -> tuple[int, dict]:
    """`python -m quill_stack.health monitor` as compose's healthcheck runs it."""
    environ = {
        **os.environ,
        "QUILL_REDIS_URL": locked_redis["url"],
        "QUILL_REDIS_PASSWORD_FILE": str(locked_redis["secret"]),
        **env,
    }
    environ.pop("QUILL_REDIS_PASSWORD", None)
    done = subprocess.run(
        [sys.executable, "-m", "quill_stack.health", "monitor"],
        env=environ, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def test_the_monitor_probe_reads_every_clusters_heartbeat_without_django(locked_redis):
    client = redis_py.Redis.from_url(with_password(locked_redis["url"], PASSWORD))
    assert keys.DEFAULT_CLUSTER == clusters.DEFAULT
    east, west = keys.cluster_key("east", keys.HEARTBEAT), keys.cluster_key("west", keys.HEARTBEAT)
    assert (keys.cluster_key("default", keys.HEARTBEAT), east) == (
        "quill:monitor:heartbeat",
        "quill:c:east:monitor:heartbeat",
    )
    client.delete(keys.HEARTBEAT, east, west)
    assert _monitor_probe(locked_redis) == (
        1,
        {"healthy": False, "detail": "default: no monitor sample in the last 10 s (last: never)"},
    )
    client.set(keys.HEARTBEAT, time.time() - 60)
    code, reply = _monitor_probe(locked_redis)
    assert code == 1 and reply["detail"].startswith("default: no monitor sample in the last 10 s")
    assert reply["detail"].endswith(" s ago)")
    # later than now, as a loaded machine may start the probe many seconds late
    client.set(keys.HEARTBEAT, time.time() + 600)
    assert _monitor_probe(locked_redis) == (
        0,
        {"healthy": True, "detail": "default: monitor sampled 0.0 s ago"},
    )
    two = json.dumps([
        {"name": n, "bootstrap.servers": "127.0.0.1:9092", "zookeeper.connect": "127.0.0.1:2181"}
        for n in ("east", "west")
    ])  # fmt: skip
    client.set(east, time.time() + 600)
    code, reply = _monitor_probe(locked_redis, QUILL_CLUSTERS=two)
    assert code == 1 and reply["detail"].startswith("east: monitor sampled 0.0 s ago; west: no ")
    client.set(west, time.time() + 600)
    assert _monitor_probe(locked_redis, QUILL_CLUSTERS=two)[0] == 0
    # `manage.py monitor --check` says the same through Django's settings
    check = subprocess.run(
        [sys.executable, "manage.py", "monitor", "--check", "--skip-checks"],
        env={**os.environ, "QUILL_REDIS_URL": with_password(locked_redis["url"], PASSWORD),
             "QUILL_CLUSTERS": two},
        capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("east: monitor sampled 0.0 s ago; west: monitor sampled")
    code, reply = _monitor_probe(locked_redis, QUILL_CLUSTERS='{"east": 1}')
    assert code == 1 and reply["detail"].startswith("QUILL_CLUSTERS: ")
    # the password is what lets it in: without it, Redis refuses and the probe says so
    code, reply = _monitor_probe(locked_redis, QUILL_REDIS_PASSWORD_FILE="")
    assert code == 1 and "reading the monitor's heartbeat" in reply["detail"]
    client.close()
