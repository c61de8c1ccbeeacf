"""Fixtures and helpers for tests/test_ops_*.py: a 3-broker cluster with the console
(daphne) and a Celery worker running as the stack runs them, sharing one state dir
(its SQLite database), on a Redis database of their own; API tokens for an operator and
an admin; a small JSON client; reading a topic back whole."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from quill_stack import ports, services
from quill_stack.process import ManagedProcess
from quill_stack.services import PROJECT_ROOT, PYTHON
from quill_stack.state import owner_env
from tests.console_helpers import seed_console_db
from tests.wait_helpers import wait_until

PASSWORD = "ops-" + uuid.uuid4().hex
REDIS_DB = 7  # Celery queue and channel layer of these tests only
FAST = {"replica.lag.time.max.ms": "2000", "group.initial.rebalance.delay.ms": "0"}
# beat's scan for orphaned operations every 2 s (15 s by default): a lost message's
# operation is taken up within seconds; what the scan takes up is the same
FAST_SCAN = {"QUILL_ORPHAN_SCAN_S": "2"}

TOKEN_SCRIPT = """
from django.contrib.auth import get_user_model
from console.models import ApiToken
from console.roles import set_role
user = get_user_model().objects.create_user({name!r}, password={password!r})
set_role(user, {role!r})
print(user.get_username(), ApiToken.issue(user, "tests")[1])
"""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


@dataclass
class OpsStack:
    cluster: object
    state_dir: Path
    settings: dict
    console: ManagedProcess
    worker: ManagedProcess
    base: str
    tokens: dict = field(default_factory=dict)
    users: dict = field(default_factory=dict)  # role -> user name (password PASSWORD)

    def call(self, method: str, path: str, body=None, role: str = "operator"):
        """(status, JSON answer) of an API call as `role`."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base}/api{path}",
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.tokens[role]}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def operation(self, op_id: int) -> dict:
        status, body = self.call("GET", f"/operations/{op_id}")
        assert status == 200, body
        return body

    def wait_state(self, op_id: int, states=("succeeded",), timeout: float = 180.0) -> dict:
        ended = ("succeeded", "failed", "cancelled")

        def reached():
            op = self.operation(op_id)
            if op["state"] in states or op["state"] in ended:
                return op
            return None

        op = wait_until(reached, timeout, f"operation {op_id} to reach {states}", 0.5)
        assert op["state"] in states, (op["state"], op["error"], op["steps"][-5:])
        return op

    def start_worker(self, wait: bool = True) -> None:
        self.worker = ManagedProcess(
            services.worker_spec(self.state_dir, self.settings), owner_env(self.state_dir)
        )
        self.worker.start()
        if wait:
            self.worker.wait_healthy(timeout=120)

    def shell(self, script: str) -> str:
        """What `script` prints, run by `manage.py shell` on the stack's database."""
        return manage_shell(self.settings, script)

    def zk_config(self, entity: str) -> dict:
        zk = self.cluster.zk_client()
        if not zk.exists(f"/config/{entity}"):
            return {}
        return json.loads(zk.get(f"/config/{entity}")[0])["config"]

    def assignment(self, topic: str) -> dict[int, list[int]]:
        data = json.loads(self.cluster.zk_client().get(f"/brokers/topics/{topic}")[0])
        return {int(p): r for p, r in data["partitions"].items()}


def manage_shell(settings: dict, script: str) -> str:
    """What `script` prints, run by `manage.py shell` with the stack's `settings`."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings", **settings}
    out = subprocess.run(
        [PYTHON, "manage.py", "shell", "-c", script],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout


def _token(state_dir: Path, settings: dict, role: str, password: str = "") -> list[str]:
    """A new user with `role` (and `password`); returns [its name, its API token]."""
    return _tokens(settings, [role], password)[role]


def _tokens(settings: dict, roles: list[str], password: str = "") -> dict[str, list[str]]:
    """A new user for each of `roles`, made by one `manage.py shell` (a Django start
    each costs seconds): role -> [its name, its API token]."""
    script = "".join(
        TOKEN_SCRIPT.format(name=unique(role), password=password or uuid.uuid4().hex, role=role)
        for role in roles
    )
    lines = manage_shell(settings, script).strip().splitlines()[-len(roles) :]
    return {role: line.split() for role, line in zip(roles, lines, strict=True)}


@contextlib.contextmanager
def running_stack(
    cluster, redis_url: str, state_dir: Path, monitor: bool = False, more: dict | None = None
):
    """The console and a worker (and the monitor) for `cluster`, with tokens; stopped after.
    `more`: more settings (QUILL_* variables) for all three."""
    settings = services.app_env(state_dir, redis_url, cluster.zk_connect, cluster.bootstrap)
    settings.update(more or {})
    port = ports.free_port()
    console = ManagedProcess(services.console_spec(state_dir, settings, port), owner_env(state_dir))
    extra = []
    seed_console_db(state_dir, admin=False)  # migrated: nothing waits for the console's
    stack = None
    try:
        # the worker and the monitor start beside the console's migrate (nothing left to
        # do) and daphne, and the users' shell after it; then each is waited for
        stack = OpsStack(cluster, state_dir, settings, console, None, f"http://127.0.0.1:{port}")
        stack.start_worker(wait=False)
        if monitor:
            extra.append(
                ManagedProcess(services.monitor_spec(state_dir, settings), owner_env(state_dir))
            )
            extra[-1].start()
        console.start()
        for role, (user, token) in _tokens(
            settings, ["operator", "admin", "viewer"], PASSWORD
        ).items():
            stack.users[role], stack.tokens[role] = user, token
        for proc in (console, stack.worker, *extra):
            proc.wait_healthy(timeout=120)
        yield stack
    finally:  # thrown away with its state dir: kill -9 (a graceful stop takes seconds)
        for proc in extra:
            proc.kill()
        if stack is not None and stack.worker is not None:
            stack.worker.kill()
        console.kill()


@pytest.fixture(scope="module")
def ops_stack(cluster_factory, redis_server, tmp_path_factory):
    cluster = cluster_factory(3, **FAST)
    redis_url = redis_server.url.rsplit("/", 1)[0] + f"/{REDIS_DB}"
    state_dir = tmp_path_factory.mktemp("ops-stack")
    with running_stack(cluster, redis_url, state_dir, more=FAST_SCAN) as stack:
        yield stack


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict:
    """partition -> list of values, read from the log start to the end (the high
    watermark: done once the next offset reaches it, so a compacted log, whose offsets
    have gaps, is read to its end and not until the timeout)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False}
    )
    ends, out = {}, {p: [] for p in range(partitions)}
    for p in range(partitions):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    consumer.assign([TopicPartition(topic, p, ends[p][0]) for p in range(partitions)])
    nxt = {p: ends[p][0] for p in out}
    deadline = time.time() + timeout
    while any(nxt[p] < ends[p][1] for p in out) and time.time() < deadline:
        for msg in consumer.consume(1000, 1.0):
            assert not msg.error(), msg.error()
            out[msg.partition()].append(msg.value())
            nxt[msg.partition()] = msg.offset() + 1
    consumer.close()
    return out
