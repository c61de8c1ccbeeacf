"""Fixtures for the console's tests (`pytest_plugins = ["tests.console_helpers"]`):
a one-broker cluster shared by a module, Django settings pointed at it and at the
session Redis, and logins for every role."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from console.roles import ADMIN, OPERATOR, VIEWER, set_role
from quill_stack import services
from quill_stack.process import child_env
from quill_stack.services import PROJECT_ROOT
from tests.stack_helpers import create_admin

ROLES = ("anonymous", "norole", VIEWER, OPERATOR, ADMIN)  # the permission matrix
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
WAIT_MS = 15_000


@pytest.fixture(scope="module")
def console_cluster(cluster_factory):
    return cluster_factory(1)


def point_console_at(settings, cluster, redis_server) -> None:
    from cluster_client import zk
    from console.channel_layer import channel_layers

    settings.QUILL_BOOTSTRAP_SERVERS = cluster.bootstrap
    settings.QUILL_ZOOKEEPER_CONNECT = cluster.zk_connect
    settings.QUILL_REDIS_URL = redis_server.url
    settings.CHANNEL_LAYERS = channel_layers(redis_server.url)
    zk.reset()


@pytest.fixture
def console(settings, console_cluster, redis_server, db):
    """The console pointed at the module's cluster; `.cluster`, `.login(role)`."""
    point_console_at(settings, console_cluster, redis_server)
    yield SimpleNamespace(cluster=console_cluster, login=make_login, user=make_user)
    from cluster_client import zk

    zk.reset()


def make_user(role: str):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(f"{role}-{uuid.uuid4().hex[:6]}", password="pw")
    if role in (VIEWER, OPERATOR, ADMIN):
        set_role(user, role)
    return user


def make_login(role: str, enforce_csrf: bool = False):
    """A Django test client logged in with `role` ('anonymous': not logged in)."""
    from django.test import Client

    client = Client(enforce_csrf_checks=enforce_csrf)
    if role != "anonymous":
        client.force_login(make_user(role))
    return client


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


_SEED: dict[str, object] = {}  # the session's migrated console database, made once


def seed_console_db(state_dir: Path, admin: bool = True) -> str:
    """A copy, in `state_dir`, of a console database as a fresh stack's first start
    leaves it (`manage.py migrate`, then `manage.py createadmin`; without the admin if
    not `admin`), made once a session: a fresh migrate costs seconds of CPU at every
    console start. The console's own migrate still runs at its start and finds nothing
    to do. Returns the admin's password ("" without one)."""
    if not _SEED:
        seed = Path(tempfile.mkdtemp(prefix="quill-console-seed-"))
        atexit.register(shutil.rmtree, seed, True)
        spec = services.console_spec(seed, services.app_env(seed, "redis://x", "x", "x"), 1)
        migrate = subprocess.run(
            spec.pre_start[0],
            cwd=PROJECT_ROOT,
            env=child_env(spec),
            capture_output=True,
            text=True,
        )
        if migrate.returncode != 0:
            pytest.fail(f"the console's migrate failed:\n{migrate.stdout}{migrate.stderr}")
        shutil.copyfile(seed / "console.sqlite3", seed / "migrated.sqlite3")
        _SEED.update(
            migrated=seed / "migrated.sqlite3",
            db=seed / "console.sqlite3",
            password=create_admin(seed),
        )
    target = state_dir / "console.sqlite3"
    shutil.copyfile(_SEED["db" if admin else "migrated"], target)
    target.chmod(0o600)
    return str(_SEED["password"]) if admin else ""


def start_console_and_monitor(state_dir, settings: dict) -> tuple[list, int, str]:
    """The console under daphne and the monitor as `make run` starts them, healthy, on
    a seeded database (seed_console_db); (their processes, the console's port, the
    admin's password). End them with discard()."""
    from quill_stack import ports
    from quill_stack.process import ManagedProcess
    from quill_stack.state import owner_env

    password = seed_console_db(state_dir)
    port = ports.free_port()
    procs = [
        ManagedProcess(services.console_spec(state_dir, settings, port), owner_env(state_dir)),
        ManagedProcess(services.monitor_spec(state_dir, settings), owner_env(state_dir)),
    ]
    # the database is migrated already: the monitor starts beside the console's migrate
    for proc in reversed(procs):
        proc.start()
    for proc in procs:
        proc.wait_healthy()
    return procs, port, password


@contextmanager
def console_stack(cluster, redis_server, state_dir: Path, redis_db: int, **extra: str):
    """The console (daphne) and the monitor for `cluster`, on Redis db `redis_db` (flushed),
    with `extra` settings; yields (its URL, the admin's password). Needs chromium."""
    import redis

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is missing: run `make install` (apt-get install chromium)")
    redis_url = f"redis://{redis_server.host}:{redis_server.port}/{redis_db}"
    redis.Redis.from_url(redis_url).flushdb()
    settings = services.app_env(state_dir, redis_url, cluster.zk_connect, cluster.bootstrap)
    procs, port, password = start_console_and_monitor(state_dir, {**settings, **extra})
    try:
        yield f"http://127.0.0.1:{port}", password
    finally:
        discard(procs)


def discard(procs) -> None:
    """kill -9 the console's processes (the console and the monitor): thrown away with
    their state dir, and a graceful stop (the monitor's clients closing on a cluster
    some test broke) takes seconds no test asserts on; tests of a clean stop stop a
    process themselves."""
    for proc in reversed(procs):
        proc.kill()


def cluster_spec(name: str, cluster) -> dict:
    """`cluster` as one entry of QUILL_CLUSTERS, named `name`."""
    return {
        "name": name,
        "bootstrap.servers": cluster.bootstrap,
        "zookeeper.connect": cluster.zk_connect,
    }


def log_in(page, url: str, password: str) -> None:
    page.goto(f"{url}/accounts/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


@contextmanager
def chromium_page(out_dir: Path):
    """A Playwright page in Debian's chromium (screenshots go to ``out_dir``)."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pg = browser.new_page(viewport={"width": 1440, "height": 900})
        pg.set_default_timeout(WAIT_MS)
        yield pg
        browser.close()


OUT = PROJECT_ROOT / "test-output" / "console"  # the browser tests' screenshots


@pytest.fixture(scope="module")
def page(stack):
    """A Chromium page for the module's ``stack`` (console up), its output in ``OUT``."""
    with chromium_page(OUT) as pg:
        yield pg


# Group ids any Kafka client may choose: / ? # % space, unicode, route-like tails.
ODD_GROUPS = ("a/b", "q?x", "h#1", "p%20c", "sp ace", "ünï-组", "x/reset", "y/")


def commit_group_offsets(bootstrap: str, groups, offset: int = 3) -> str:
    """A new one-partition topic with `offset` + 2 records, and each group's committed
    offset on it at `offset`; returns the topic."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique("odd")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(offset + 2):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(30) == 0
    for group in groups:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        consumer.close()
    return topic
