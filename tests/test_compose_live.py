"""The stack in containers, for real: install and start a Docker engine when there is
none (scripts/docker-engine.sh), build the images once (scripts/compose.sh build: a local
Debian base when Docker Hub is unreachable), `docker-compose up -d` under a project of
its own with free host ports, wait until every service is healthy, then from the host:
kcat lists 3 brokers through the published EXTERNAL listener, a topic takes and gives back
10,000 records with kcat, the console serves its login page and the first admin login
works, a broker container killed -9 comes back (restart: unless-stopped) and the
DockerDriver restarts another; `down` then `up` finds the records, the group's offsets,
the admin login and the audit log; `down -v` deletes the volumes.

It never skips: no engine, a failed build or an unhealthy service fails it with the reason.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from operations.restart.docker import DockerDriver
from quill_stack import ports
from quill_stack.services import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

TOPIC = "compose-live"
RECORDS = 10_000
GROUP = "compose-live-group"


def _run(argv: list[str], env=None, timeout: float = 600, check: bool = True, **kw):
    result = subprocess.run(
        argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=timeout, **kw
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
            f"{result.stderr[-3000:]}",
            pytrace=False,
        )
    return result


def _wait(condition, what: str, timeout: float = 300.0, interval: float = 0.25):
    """Until `condition()` is truthy (asked every `interval` s: a docker CLI call or a
    kcat run each, a fraction of a second; a longer pause only adds to each wait)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (Exception, pytest.fail.Exception) as exc:  # the service may still be starting
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last!r})")


class Stack:
    """One compose project: its own containers, network and volumes, free host ports."""

    def __init__(self) -> None:
        self.project = f"quilltest{uuid.uuid4().hex[:8]}"
        zk, b1, b2, b3, console = ports.free_ports(5)
        self.broker_ports = [b1, b2, b3]
        self.console_port = console
        self.env = {
            **os.environ,
            "COMPOSE_PROJECT_NAME": self.project,
            "QUILL_ZK_PORT": str(zk),
            "QUILL_BROKER_1_PORT": str(b1),
            "QUILL_BROKER_2_PORT": str(b2),
            "QUILL_BROKER_3_PORT": str(b3),
            "QUILL_CONSOLE_PORT": str(console),
            "QUILL_COMPOSE_TIMEOUT": "600",
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{p}" for p in self.broker_ports)

    def script(self, *args: str, timeout: float = 1800):
        return _run(["scripts/compose.sh", *args], env=self.env, timeout=timeout)

    def compose(self, *args: str, check: bool = True, timeout: float = 300):
        return _run(["docker-compose", *args], env=self.env, timeout=timeout, check=check)

    def container(self, service: str) -> str:
        """The service's container, by the labels docker-compose gives it (what `compose
        ps -q SERVICE` prints): the docker CLI answers in milliseconds where a
        docker-compose command starts a Python interpreter, and the waits below ask often."""
        labels = {
            "com.docker.compose.project": self.project,
            "com.docker.compose.service": service,
            "com.docker.compose.oneoff": "False",
        }
        filters = [a for k, v in labels.items() for a in ("--filter", f"label={k}={v}")]
        ids = _run(["docker", "ps", "-aq", "--no-trunc", *filters]).stdout.split()
        assert len(ids) == 1, f"{service}: containers {ids}"
        return ids[0]

    def inspect(self, service: str) -> dict:
        out = _run(["docker", "inspect", self.container(service)]).stdout
        return json.loads(out)[0]

    def exec(self, service: str, *argv: str, check: bool = True):
        """`docker-compose exec -T SERVICE ...`, through the docker CLI."""
        return _run(["docker", "exec", self.container(service), *argv], check=check)

    def logs(self, service: str) -> str:
        """The service's output (`docker-compose logs SERVICE`): stdout, then stderr."""
        out = _run(["docker", "logs", self.container(service)])
        return out.stdout + out.stderr

    def healthy(self, service: str) -> bool:
        state = self.inspect(service)["State"]
        return state["Running"] and state.get("Health", {}).get("Status") == "healthy"

    def volumes(self) -> list[str]:
        out = _run(
            [
                "docker",
                "volume",
                "ls",
                "-q",
                "--filter",
                f"label=com.docker.compose.project={self.project}",
            ]
        ).stdout
        return out.split()

    def kcat(self, *args: str, timeout: float = 300, **kw):
        return _run(["kcat", "-b", self.bootstrap, *args], timeout=timeout, **kw)

    def console_url(self, path: str) -> str:
        return f"http://localhost:{self.console_port}{path}"


@pytest.fixture(scope="module")
def stack():
    engine = subprocess.run(
        ["scripts/docker-engine.sh"], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    if engine.returncode != 0:
        pytest.fail(f"no Docker engine could be started: {engine.stderr}", pytrace=False)
    s = Stack()
    try:
        s.script("up", timeout=3600)  # build (cached after the first run), up, healthy
        yield s
    finally:
        s.compose("down", "-v", "--remove-orphans", check=False, timeout=300)


def _brokers_listed(s: Stack) -> list[dict]:
    result = s.kcat("-L", "-J", check=False)
    if result.returncode != 0:  # an ordinary exception: _wait retries it
        raise RuntimeError(f"kcat -L: {result.stderr.strip()}")
    meta = json.loads(result.stdout)
    return sorted(meta["brokers"], key=lambda b: b["id"])


def _in_sync(s: Stack) -> bool:
    """Every partition of the topic has a leader and all 3 replicas in sync."""
    meta = AdminClient({"bootstrap.servers": s.bootstrap}).list_topics(TOPIC, timeout=30)
    parts = meta.topics[TOPIC].partitions.values()
    return len(parts) == 3 and all(p.leader > 0 and len(p.isrs) == 3 for p in parts)


def _consume_all(s: Stack) -> list[str]:
    out = s.kcat("-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n").stdout
    return out.splitlines()


def _expected() -> list[str]:
    return [f"key-{i}=value-{i}" for i in range(RECORDS)]


def _all_records_back(s: Stack) -> bool:
    """A whole read of the topic returns every record. Right after a broker rejoins,
    leaderships move back to it (preferred-leader election) and a ListOffsets may meet a
    broker that does not have the partition yet: kcat -e then gives up, so read again."""
    result = s.kcat("-C", "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n", check=False)
    return result.returncode == 0 and sorted(result.stdout.splitlines()) == sorted(_expected())


def _admin_password(s: Stack) -> tuple[str, str]:
    logs = s.logs("console")
    found = re.search(r"first admin login.*?username: (\S+).*?password: (\S+)", logs, re.S)
    assert found, f"no first admin login in the console's log:\n{logs[-2000:]}"
    return found.group(1), found.group(2)


def _login(s: Stack, username: str, password: str) -> str:
    """Log in through the login form; returns the path the console redirects to."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(s.console_url("/accounts/login/"), timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token}
    ).encode()
    request = urllib.request.Request(
        s.console_url("/accounts/login/"), data=form, headers={"Referer": s.console_url("/")}
    )
    response = opener.open(request, timeout=30)
    return urllib.parse.urlparse(response.geturl()).path


AUDIT_COUNT = (
    "from console.models import AuditEntry; "
    "print(AuditEntry.objects.filter(action='compose.test').count())"
)


def _audit_count(s: Stack, before: str = "") -> int:
    """The audit entries of action compose.test, counted by a `manage.py shell` in the
    console's container after running `before` there (one Django start: seconds each
    on a loaded machine)."""
    out = s.exec("console", "python", "manage.py", "shell", "-c", before + AUDIT_COUNT).stdout
    return int(out.strip().splitlines()[-1])


def test_kcat_lists_three_brokers_at_their_published_addresses(stack):
    brokers = _brokers_listed(stack)
    assert [(b["id"], b["name"]) for b in brokers] == [
        (i + 1, f"localhost:{port}") for i, port in enumerate(stack.broker_ports)
    ]


def test_ten_thousand_records_through_the_published_ports(stack, tmp_path):
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])[TOPIC].result(
        timeout=60
    )
    lines = tmp_path / "records.txt"
    lines.write_text("".join(f"key-{i}:value-{i}\n" for i in range(RECORDS)))
    stack.kcat("-P", "-t", TOPIC, "-K:", "-X", "acks=all", "-l", str(lines))
    assert sorted(_consume_all(stack)) == sorted(_expected())
    # the offsets add up: high watermarks of the 3 partitions
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": GROUP})
    try:
        marks = [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 30) for p in range(3)]
        assert sum(high for _low, high in marks) == RECORDS
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, marks[p][1]) for p in range(3)], asynchronous=False
        )
    finally:
        consumer.close()


def test_console_login_page_and_first_admin_login(stack):
    page = urllib.request.urlopen(stack.console_url("/accounts/login/"), timeout=30)
    assert page.status == 200
    assert b'name="password"' in page.read()
    username, password = _admin_password(stack)
    assert _login(stack, username, password) != "/accounts/login/"
    code = (
        "from console.audit import record; "
        "record(None, 'cli', 'compose.test', 'volume:console-state'); "
    )
    assert _audit_count(stack, before=code) == 1


def test_a_killed_broker_container_comes_back(stack):
    state = stack.inspect("broker-2")["State"]
    restarts = stack.inspect("broker-2")["RestartCount"]
    os.kill(state["Pid"], signal.SIGKILL)  # a crash, as the engine sees it
    _wait(lambda: stack.inspect("broker-2")["RestartCount"] > restarts, "broker-2 restarted")
    _wait(lambda: stack.healthy("broker-2"), "broker-2 healthy again", timeout=300)
    _wait(lambda: len(_brokers_listed(stack)) == 3, "3 brokers listed")
    _wait(lambda: _in_sync(stack), "broker-2 back in every ISR")
    _wait(lambda: _all_records_back(stack), "all 10,000 records read back", timeout=180)


def _serving_mode(s: Stack, service: str) -> str:
    """ZooKeeper's own word (srvr) on whether `service` serves: leader or follower."""
    probe = "exec 3<>/dev/tcp/127.0.0.1/2181 && printf srvr >&3 && cat <&3"
    out = s.exec(service, "bash", "-c", probe, check=False).stdout
    found = re.search(r"Mode: (\w+)", out)
    return found.group(1) if found else ""


def test_the_stack_keeps_working_with_one_zookeeper_stopped(stack, tmp_path):
    modes = {n: _serving_mode(stack, f"zookeeper-{n}") for n in (1, 2, 3)}
    assert sorted(modes.values()) == ["follower", "follower", "leader"], modes
    leader = next(n for n, mode in modes.items() if mode == "leader")
    stack.compose("stop", f"zookeeper-{leader}")  # the leader: the others elect anew
    try:
        # a new topic needs ZooKeeper writes (the controller's) and its leaders elected
        topic = "compose-zk-minority"
        admin = AdminClient({"bootstrap.servers": stack.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[
            topic
        ].result(timeout=120)
        lines = tmp_path / "minority.txt"
        lines.write_text("".join(f"m-{i}:v-{i}\n" for i in range(300)))
        stack.kcat("-P", "-t", topic, "-K:", "-X", "acks=all", "-l", str(lines))
        out = stack.kcat("-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n")
        assert sorted(out.stdout.splitlines()) == sorted(f"m-{i}=v-{i}" for i in range(300))
    finally:
        stack.compose("start", f"zookeeper-{leader}")
    _wait(lambda: stack.healthy(f"zookeeper-{leader}"), "the stopped server back", timeout=300)
    assert _serving_mode(stack, f"zookeeper-{leader}") in ("leader", "follower")


def test_the_docker_driver_restarts_a_broker_container(stack):
    driver = DockerDriver(project=stack.project)
    assert driver.available() is None
    started = stack.inspect("broker-3")["State"]["StartedAt"]
    driver.restart(3, timeout=30)
    assert stack.inspect("broker-3")["State"]["StartedAt"] != started
    _wait(lambda: stack.healthy("broker-3"), "broker-3 healthy after the restart", timeout=300)
    _wait(lambda: _in_sync(stack), "broker-3 back in every ISR")
    _wait(lambda: _all_records_back(stack), "all 10,000 records read back", timeout=180)


def test_down_then_up_keeps_the_data_and_down_v_deletes_it(stack):
    username, password = _admin_password(stack)
    stack.compose("down", timeout=300)
    assert stack.volumes(), "down must keep the volumes"
    stack.script("up", timeout=1800)
    _wait(lambda: _in_sync(stack), "every partition led and in sync after up")
    _wait(lambda: _all_records_back(stack), "all 10,000 records read back", timeout=180)
    consumer = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": GROUP})
    try:
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(3)], timeout=60)
        assert sum(tp.offset for tp in committed) == RECORDS
    finally:
        consumer.close()
    assert "admin login exists" in stack.logs("console")
    assert _login(stack, username, password) != "/accounts/login/"
    assert _audit_count(stack) == 1
    stack.compose("down", "-v", timeout=300)
    assert stack.volumes() == []


def test_the_docker_driver_says_why_it_cannot_restart(tmp_path):
    missing = tmp_path / "docker.sock"
    reason = DockerDriver(socket_path=str(missing)).available()
    assert reason == f"no Docker socket at {missing}: mount it into the worker (docker-compose.yml)"
    missing.write_text("")  # a file, not an engine
    reason = DockerDriver(socket_path=str(missing)).available()
    assert reason.startswith(f"the Docker engine at {missing} does not answer")
