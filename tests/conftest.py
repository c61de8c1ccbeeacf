"""Real services for tests: ZooKeeper, Redis and broker processes.

- `zookeeper`, `redis` (session): one real server each on a free port, state in a tmp
  dir, stopped at the end of the session.
- `cluster_factory` (module) and its alias `cluster` (function): a factory.
  `cluster_factory(n_brokers=1, **overrides)` starts brokers against the session
  ZooKeeper, each cluster under its own chroot so tests never see each other's topics,
  and waits until every broker is healthy (registered at /brokers/ids/<id> and
  answering ApiVersions). Overrides are broker properties:
  `cluster(3, **{"log.segment.bytes": 1024})` or `cluster(3, log_segment_bytes=1024)`;
  `quill.metrics.port="free"` gives each broker a free metrics port (`b.metrics_port`);
  a callable value is called with (broker_id, port) for a per-broker value;
  `chroot="/name"` picks the chroot (a broker's own zookeeper.connect can then name it).
  `c.brokers[i]` has .id .port .log_dir .kill() .stop() .start() .restart() .pause()
  .resume(). A cluster made in a test is stopped when the test ends, one made by a
  module-scoped fixture when the module ends; also when a test fails, whose report
  then shows the end of each running broker's log.

Processes are built by quill_stack.services, exactly as `make run` starts them.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.security.jaas import jaas_section
from broker.zk.security import (
    DEFAULT_CLIENT_SECTION,
    DIGEST_LOGIN_MODULE,
    ZkCredentials,
    zk_client,
)
from quill_stack import ports, services
from quill_stack.process import ManagedProcess, StartError, tail
from quill_stack.redis_auth import with_password
from quill_stack.state import owner_env
from tests.wire import WireClient

# Test clusters notice a dead broker faster than Kafka's 18 s default session timeout;
# a test can pass its own zookeeper.session.timeout.ms.
TEST_BROKER_DEFAULTS = {"zookeeper.session.timeout.ms": "6000"}
# ZooKeeper for tests: a short tick allows session timeouts from 1 s to 60 s.
TEST_ZOOKEEPER_SETTINGS = {
    "tickTime": "500",
    "minSessionTimeout": "1000",
    "maxSessionTimeout": "60000",
}
LOG_TAIL_LINES = 60


def _cache_bytecode() -> None:
    """A run starts hundreds of Python processes of ours (brokers, CLIs, the console,
    workers), each importing ~150 of our modules. With PYTHONDONTWRITEBYTECODE set (as in
    a shell that keeps the tree free of __pycache__), each one compiled them all again:
    ~0.4 s of CPU per broker start. Write the bytecode instead, outside the tree
    (PYTHONPYCACHEPREFIX under .state/, which git and docker ignore), for this process
    and every child."""
    if not os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
        return
    prefix = os.environ.setdefault(
        "PYTHONPYCACHEPREFIX", str(services.PROJECT_ROOT / ".state" / "pycache")
    )
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_cache_bytecode()


@dataclass
class Server:
    """A session-wide ZooKeeper or Redis. A secured ZooKeeper has `credentials` (the
    brokers' SASL login, which the fixtures' own clients use) and `jaas` (user -> its
    client JAAS file); a Redis with a password has `password`."""

    host: str
    port: int
    proc: ManagedProcess
    credentials: ZkCredentials | None = None
    jaas: dict[str, Path] = field(default_factory=dict)
    password: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:  # Redis
        return with_password(f"redis://{self.host}:{self.port}/0", self.password)


def _start_server(spec: services.ServiceSpec, owner: Path) -> ManagedProcess:
    proc = ManagedProcess(spec, owner_env(owner))
    try:
        proc.start()
        proc.wait_healthy()
    except (StartError, OSError) as exc:
        proc.kill()
        pytest.fail(f"could not start {spec.name} for the tests: {exc}", pytrace=False)
    return proc


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing(django_test_environment):
    """Django's default hasher (PBKDF2, 1,000,000 rounds) cost ~0.5 s of CPU each time a
    test made a user with a password or logged one in, hundreds of times a run. Hash
    with MD5 in this process, as Django's testing docs advise; the other hashers stay
    listed, so a PBKDF2 hash made by a console process still checks. No test here is
    about the hash itself; console processes the tests start keep Django's default."""
    from django.conf import global_settings
    from django.test.utils import override_settings

    hashers = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    with override_settings(PASSWORD_HASHERS=hashers + global_settings.PASSWORD_HASHERS):
        yield


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    state = tmp_path_factory.mktemp("zookeeper")
    port = ports.free_port()
    spec = services.zookeeper_spec(state, port, settings=TEST_ZOOKEEPER_SETTINGS)
    proc = _start_server(spec, state)
    yield Server("127.0.0.1", port, proc)
    proc.stop()


# The secured ZooKeeper's SASL users: the brokers' principal, and another user who can
# log in but owns nothing (the attacker of tests/test_zookeeper_security.py).
SECURED_ZOOKEEPER_USERS = {"kafka": "kafka-secret", "mallory": "mallory-secret"}


@pytest.fixture(scope="session")
def secured_zookeeper(tmp_path_factory):
    """A ZooKeeper that takes only SASL DIGEST-MD5 logins of SECURED_ZOOKEEPER_USERS and
    refuses other sessions, as the secure stack runs it. `jaas[user]` is a client JAAS
    file for that user (a broker's java.security.auth.login.config)."""
    state = tmp_path_factory.mktemp("zookeeper-secured")
    port = ports.free_port()
    spec = services.zookeeper_spec(
        state, port, settings=TEST_ZOOKEEPER_SETTINGS, sasl_users=SECURED_ZOOKEEPER_USERS
    )
    jaas = {}
    for user, secret in SECURED_ZOOKEEPER_USERS.items():
        jaas[user] = state / f"{user}.jaas"
        options = {"username": user, "password": secret}
        jaas[user].write_text(jaas_section(DEFAULT_CLIENT_SECTION, DIGEST_LOGIN_MODULE, options))
    proc = _start_server(spec, state)
    creds = ZkCredentials("kafka", SECURED_ZOOKEEPER_USERS["kafka"])
    yield Server("127.0.0.1", port, proc, credentials=creds, jaas=jaas)
    proc.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    state = tmp_path_factory.mktemp("redis")
    port = ports.free_port()
    proc = _start_server(services.redis_spec(state, port), state)
    yield Server("127.0.0.1", port, proc)
    proc.stop()


class Broker:
    """One broker process of a test cluster."""

    def __init__(self, spec: services.ServiceSpec, broker_id: int, owner: Path):
        self.id = broker_id
        self.spec = spec
        self.port = spec.port
        self.log_dir = spec.dirs[0]
        self.log_path = spec.log_path
        self.metrics_port = int(spec.config.get("QUILL_METRICS_PORT", 0))
        self.proc = ManagedProcess(spec, owner_env(owner))

    def __repr__(self) -> str:
        return f"<Broker {self.id} port={self.port} pid={self.proc.pid}>"

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.alive()

    def launch(self) -> None:
        """Start the process without waiting for it to be healthy."""
        self.proc.start()

    def wait_healthy(self, timeout: float | None = None) -> None:
        self.proc.wait_healthy(timeout)

    def start(self, timeout: float | None = None) -> None:
        """Start a stopped or killed broker; a running one is left as it is (a second
        process would only fail on the log dir's lock)."""
        if self.alive():
            return
        self.launch()
        self.wait_healthy(timeout)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM and wait (SIGKILL after the stop timeout); returns the exit code."""
        return self.proc.stop(timeout)

    def kill(self) -> int | None:
        """kill -9."""
        return self.proc.kill()

    def pause(self) -> None:
        """SIGSTOP: the process stays, but answers nothing (a hung broker)."""
        self.proc.pause()

    def resume(self) -> None:
        self.proc.resume()

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The end of the broker's log, across restarts."""
        return tail(self.log_path, lines)


class Cluster:
    """Brokers 1..n on free ports, in their own ZooKeeper chroot."""

    def __init__(
        self, zk: Server, state_dir: Path, n_brokers: int, overrides: dict, chroot: str = ""
    ):
        self.state_dir = state_dir
        self.chroot = chroot or f"/quill-{uuid.uuid4().hex[:12]}"
        self.zk_connect = zk.address + self.chroot
        self._zk_clients: list = []
        broker_ports = ports.free_ports(n_brokers)
        metrics = [{}] * n_brokers
        if overrides.get("quill.metrics.port") == "free":
            metrics = [{"quill.metrics.port": p} for p in ports.free_ports(n_brokers)]
        self.brokers = [
            Broker(
                services.broker_spec(
                    state_dir,
                    broker_id=index + 1,
                    port=port,
                    zk_connect=self.zk_connect,
                    n_brokers=n_brokers,
                    overrides=_for_broker(
                        {**TEST_BROKER_DEFAULTS, **overrides, **metrics[index]}, index + 1, port
                    ),
                ),
                index + 1,
                state_dir,
            )
            for index, port in enumerate(broker_ports)
        ]
        self._root_zk = zk.address
        self._zk_login = zk.credentials

    def __repr__(self) -> str:
        return f"<Cluster {self.bootstrap} zk={self.zk_connect}>"

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def broker(self, broker_id: int) -> Broker:
        return next(b for b in self.brokers if b.id == broker_id)

    def start(self) -> None:
        client = self.zk_client(chroot=False)
        client.ensure_path(self.chroot)
        for broker in self.brokers:
            broker.launch()
        for broker in self.brokers:
            broker.wait_healthy()
        self.wait_brokers_known()

    def wait_brokers_known(self, timeout: float = 60.0) -> None:
        """Until every broker's Metadata lists all of them: the controller has taken in
        each registration (a topic created before that would be led by the brokers it
        knows, not by its first replica). Listeners that need TLS or a login are not
        asked: their tests wait on what they use."""
        if len(self.brokers) < 2:
            return
        deadline = time.monotonic() + timeout
        for broker in self.brokers:
            while (known := _brokers_listed(broker.port)) is not None and known < len(self.brokers):
                if time.monotonic() > deadline:
                    raise StartError(f"{self}: the controller never listed every broker")
                time.sleep(0.05)
            if known is None:
                return  # not a plaintext listener

    def zk_client(self, chroot: bool = True):
        """A started KazooClient on this cluster's chroot, stopped at teardown (logged
        in as the brokers' principal on a secured ZooKeeper)."""
        hosts = self.zk_connect if chroot else self._root_zk
        client = zk_client(hosts, 10, self._zk_login)
        client.start(timeout=10)
        self._zk_clients.append(client)
        return client

    def stop(self) -> None:
        for broker in self.brokers:
            broker.proc.terminate()
        for broker in self.brokers:
            broker.proc.wait_stopped()
        self._close_zk_clients()

    def discard(self) -> None:
        """End a cluster no test looks at again (the fixtures' teardown): kill -9. A
        graceful stop of several brokers is a controlled shutdown each (leaderships moved
        away one broker at a time: seconds per cluster), which no teardown asserts; tests
        of a clean stop call stop() or a broker's stop() themselves."""
        for broker in self.brokers:
            broker.kill()
        self._close_zk_clients()

    def _close_zk_clients(self) -> None:
        for client in self._zk_clients:
            client.stop()
            client.close()
        self._zk_clients.clear()


def _brokers_listed(port: int) -> int | None:
    """How many brokers a broker's Metadata (v1) lists; None when its first listener
    does not answer a plaintext request without a login."""
    try:
        wire = WireClient("127.0.0.1", port, timeout=5)
    except OSError:
        return None
    try:
        return len(wire.request(3, 1, {"topics": []}).brokers)
    except Exception:  # noqa: BLE001 - TLS or SASL first: closed, timed out or garbage
        return None
    finally:
        wire.close()


def _for_broker(overrides: dict, broker_id: int, port: int) -> dict:
    """Overrides whose value is a callable get ``value(broker_id, port)``: per-broker
    settings such as a second listener's port."""
    return {k: v(broker_id, port) if callable(v) else v for k, v in overrides.items()}


def _property_name(key: str) -> str:
    """log_segment_bytes -> log.segment.bytes (Kafka's keys have no underscores)."""
    return key if "." in key else key.replace("_", ".")


_LIVE: list[Cluster] = []  # clusters running now, for failure reports


class ClusterFactory:
    """cluster_factory(n_brokers=1, **overrides) -> a started Cluster."""

    def __init__(self, zk: Server, base_dir: Path, defaults: dict | None = None):
        self.zk = zk
        self.base_dir = base_dir
        self.defaults = defaults or {}  # broker properties every cluster of it gets
        self.made: list[Cluster] = []
        self.serial = 0  # never reused: a stopped cluster's data dir must not be inherited

    def __call__(self, n_brokers: int = 1, chroot: str = "", **overrides) -> Cluster:
        """``chroot``: the cluster's ZooKeeper chroot (a fresh one when empty), for a
        test that gives a broker its own zookeeper.connect (through a proxy, say)."""
        props = {**self.defaults, **{_property_name(k): v for k, v in overrides.items()}}
        self.serial += 1
        state_dir = self.base_dir / f"cluster-{self.serial}"
        c = Cluster(self.zk, state_dir, n_brokers, props, chroot)
        self.made.append(c)
        _LIVE.append(c)
        try:
            c.start()
        except StartError as exc:
            pytest.fail(str(exc), pytrace=False)
        return c

    def stop_since(self, count: int) -> None:
        """Stop the clusters made after the first `count`, newest first (killed: they
        are thrown away, see Cluster.discard)."""
        while len(self.made) > count:
            c = self.made.pop()
            c.discard()
            _LIVE.remove(c)


@pytest.fixture(scope="module")
def cluster_factory(zookeeper, tmp_path_factory):
    """Module-scoped: a module fixture may share one cluster across its tests. A cluster
    made inside a test is stopped when that test ends (see _stop_test_clusters)."""
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("clusters"))
    yield factory
    factory.stop_since(0)


@pytest.fixture(scope="module")
def secured_cluster_factory(secured_zookeeper, tmp_path_factory):
    """Clusters on the secured ZooKeeper whose brokers log in as `kafka` and create
    znodes with Kafka's secure ACLs (zookeeper.set.acl=true)."""
    defaults = {
        "java.security.auth.login.config": str(secured_zookeeper.jaas["kafka"]),
        "zookeeper.set.acl": "true",
    }
    factory = ClusterFactory(secured_zookeeper, tmp_path_factory.mktemp("secured"), defaults)
    yield factory
    factory.stop_since(0)


@pytest.fixture
def cluster(cluster_factory):
    """The same factory, for tests: `cluster(3, log_segment_bytes=1024)`."""
    return cluster_factory


@pytest.fixture(autouse=True)
def _stop_test_clusters(request):
    """Stop clusters a test made itself (module-scoped fixtures are set up before this
    function-scoped one, so clusters they made are left to the module's teardown)."""
    if "cluster_factory" not in request.fixturenames:
        yield
        return
    factory = request.getfixturevalue("cluster_factory")
    count = len(factory.made)
    yield
    factory.stop_since(count)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for c in _LIVE:
        for broker in c.brokers:
            report.sections.append(
                (f"broker-{broker.id} log ({broker.log_path})", broker.log_tail())
            )


def pytest_collection_modifyitems(items):
    for item in items:
        if "cluster_factory" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


_MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each module's wall time (setup, call and teardown of its tests, module-scoped
    fixtures included), for the summary below."""
    module = report.nodeid.split("::", 1)[0]
    _MODULE_SECONDS[module] = _MODULE_SECONDS.get(module, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The slowest modules: where the suite's time goes (the 45-minute budget)."""
    if not _MODULE_SECONDS:
        return
    slowest = sorted(_MODULE_SECONDS.items(), key=lambda kv: kv[1], reverse=True)[:30]
    terminalreporter.section("slowest modules")
    for module, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f}s {module}")
    total = sum(_MODULE_SECONDS.values())
    terminalreporter.write_line(f"{total:8.1f}s in all {len(_MODULE_SECONDS)} modules")


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Every result is in and reported by now. A non-daemon thread a test left behind
    (a client call blocked on a cluster that is gone) would keep the interpreter from
    exiting and a CI run from ending: name such threads, then end with pytest's status
    instead of waiting on them forever."""
    main = threading.main_thread()
    left = [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]
    if not left or not _EXIT_STATUS:
        return
    deadline = time.monotonic() + 10
    for thread in left:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in left if t.is_alive()]
    if not stuck:
        return
    sys.stderr.write(f"conftest: non-daemon threads still running at exit: {stuck}\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])
