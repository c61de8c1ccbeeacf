"""quill-stack: a real supervisor (in a temp state dir, on free ports) with real Redis."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from quill_stack import health, ports, services, state
from quill_stack.services import PROJECT_ROOT, Requirement, StackConfig
from quill_stack.supervisor import PreflightError, backoff_delay, preflight
from tests.stack_helpers import quill_stack, service_entry, stack_env
from tests.wait_helpers import wait_until


def status_table(stdout: str) -> dict[str, list[str]]:
    """`quill-stack status` rows by process name (the table ends at the first blank line)."""
    lines = stdout.splitlines()
    assert lines[0].split() == ["NAME", "PID", "PORT", "HEALTHY", "RESTARTS", "UPTIME"]
    rows = {}
    for line in lines[1:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


def assert_nothing_left(state_dir: Path) -> None:
    assert state.owned_processes(state_dir) == []
    assert not state.pid_path(state_dir).exists()
    assert not state.status_path(state_dir).exists()


@pytest.fixture(scope="module")
def redis_stack(tmp_path_factory):
    """`quill-stack up --services redis` in its own state dir; `down` at the end."""
    state_dir = tmp_path_factory.mktemp("stack")
    env = stack_env(state_dir, QUILL_SERVICES="redis")
    result = quill_stack(env, "up")
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield env, state_dir, result
    finally:
        quill_stack(env, "down")
        assert_nothing_left(state_dir)


def test_backoff_doubles_up_to_a_cap():
    assert [backoff_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_up_waits_until_healthy_and_status_shows_it(redis_stack):
    env, state_dir, up = redis_stack
    assert "redis is healthy" in up.stdout
    port = int(env["QUILL_REDIS_PORT"])
    assert health.redis("127.0.0.1", port) == (True, "PONG")

    status = quill_stack(env, "status")
    assert status.returncode == 0, status.stdout
    rows = status_table(status.stdout)
    assert list(rows) == ["redis"]
    name, pid, shown_port, healthy, restarts, _uptime = rows["redis"]
    assert (shown_port, healthy, restarts) == (str(port), "yes", "0")
    assert int(pid) == service_entry(state_dir, "redis")["pid"]


def test_second_up_says_already_running(redis_stack):
    env, state_dir, _ = redis_stack
    supervisor_pid = int(state.pid_path(state_dir).read_text())
    again = quill_stack(env, "up")
    assert again.returncode == 1
    assert f"already running (pid {supervisor_pid}" in again.stderr


def test_killed_child_is_restarted_and_the_restart_logged(redis_stack):
    env, state_dir, _ = redis_stack
    before = service_entry(state_dir, "redis")
    os.kill(before["pid"], signal.SIGKILL)

    def restarted():
        entry = service_entry(state_dir, "redis")
        return entry.get("restarts") == before["restarts"] + 1 and entry.get("pid") != before["pid"]

    wait_until(restarted, what="the supervisor to restart redis")
    port = int(env["QUILL_REDIS_PORT"])
    wait_until(lambda: health.redis("127.0.0.1", port)[0], what="redis to answer PING again")
    log = (state.logs_dir(state_dir) / "supervisor.log").read_text()
    assert f"redis (pid {before['pid']}) exited with code -9 (SIGKILL); restart #" in log
    assert "restart #" in (state.logs_dir(state_dir) / "redis.log").read_text()


def test_down_stops_everything_and_leaves_no_process(tmp_path):
    env = stack_env(tmp_path, QUILL_SERVICES="zookeeper,redis")
    assert quill_stack(env, "up").returncode == 0
    pids = [service_entry(tmp_path, name)["pid"] for name in ("zookeeper", "redis")]
    supervisor_pid = int(state.pid_path(tmp_path).read_text())

    down = quill_stack(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "no process of the stack is left running" in down.stdout
    for pid in [supervisor_pid, *pids]:
        assert not state.is_running(pid)
    assert_nothing_left(tmp_path)
    assert quill_stack(env, "status").returncode == 3
    again = quill_stack(env, "down")
    assert again.returncode == 0 and "not running" in again.stdout


def test_port_in_use_is_named_with_its_process_and_nothing_starts(tmp_path):
    env = stack_env(tmp_path, QUILL_SERVICES="zookeeper,redis")
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", int(env["QUILL_REDIS_PORT"])))
        squatter.listen()
        result = quill_stack(env, "up")
    assert result.returncode == 1
    port = env["QUILL_REDIS_PORT"]
    assert f"port {port} (redis) is already in use by pid {os.getpid()}" in result.stderr
    assert "QUILL_REDIS_PORT" in result.stderr
    assert_nothing_left(tmp_path)


def test_the_port_holder_is_found_while_other_fds_close(monkeypatch):
    """Found in CI: the test process's other descriptors open and close (its client
    threads) while `port_holder` reads its fd links; one gone between the listing and
    its readlink used to end the search of that process, so its port read as held by
    nobody we could see."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        ours = f"/proc/{os.getpid()}/fd/"
        readlink = os.readlink

        def closed_meanwhile(path):  # every fd listed before the socket's has gone
            if str(path).startswith(ours) and int(str(path)[len(ours) :]) < listener.fileno():
                raise FileNotFoundError(path)
            return readlink(path)

        monkeypatch.setattr(ports.os, "readlink", closed_meanwhile)
        assert ports.port_holder(port).startswith(f"pid {os.getpid()} (")


def test_foreground_run_stops_all_children_on_ctrl_c(tmp_path):
    env = stack_env(tmp_path, QUILL_SERVICES="zookeeper,redis")
    run = subprocess.Popen(
        [sys.executable, "-m", "quill_stack", "run"],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: (state.read_status(tmp_path) or {}).get("phase") == "ready",
            what="the stack to be ready",
        )
        children = state.owned_processes(tmp_path)
        assert len(children) == 2
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C does
        output, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    assert "received SIGINT" in output and "all processes stopped" in output
    assert output.index("stopped redis") > output.index("received SIGINT")
    assert_nothing_left(tmp_path)


def test_killed_supervisor_takes_its_children_and_stale_state_is_cleaned(tmp_path):
    env = stack_env(tmp_path, QUILL_SERVICES="redis")
    assert quill_stack(env, "up").returncode == 0
    supervisor_pid = int(state.pid_path(tmp_path).read_text())
    child = service_entry(tmp_path, "redis")["pid"]

    os.kill(supervisor_pid, signal.SIGKILL)
    wait_until(lambda: not state.is_running(child), what="redis to die with its supervisor")

    status = quill_stack(env, "status")
    assert status.returncode == 3
    assert f"stale pid file of supervisor pid {supervisor_pid}" in status.stdout
    assert_nothing_left(tmp_path)


def test_stale_pid_file_is_detected_and_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    state.pid_path(tmp_path).write_text(f"{dead.pid}\n")
    env = stack_env(tmp_path, QUILL_SERVICES="redis")
    assert state.running_pid(tmp_path) is None
    result = quill_stack(env, "down")
    assert result.returncode == 0
    assert f"stale pid file of supervisor pid {dead.pid}" in result.stdout
    assert not state.pid_path(tmp_path).exists()


def test_missing_debian_package_says_run_make_install(tmp_path):
    spec = services.redis_spec(tmp_path, ports.free_port())
    spec.requires = (Requirement("/nonexistent/zookeeper.jar", "zookeeper"),)
    with pytest.raises(PreflightError) as err:
        preflight([spec])
    assert "missing Debian package(s):\n  zookeeper (provides /nonexistent/zookeeper.jar)" in str(
        err.value
    )
    assert "make install" in str(err.value)


def test_bad_env_value_is_refused_with_its_name(tmp_path):
    result = quill_stack(stack_env(tmp_path, QUILL_BROKERS="three"), "up")
    assert result.returncode == 2
    assert "QUILL_BROKERS must be a whole number, got 'three'" in result.stderr


def test_stack_config_defaults_and_json_round_trip(tmp_path):
    cfg = StackConfig.from_env({"QUILL_STATE_DIR": str(tmp_path)})
    assert (cfg.brokers, cfg.zk_port, cfg.redis_port, cfg.broker_base_port, cfg.console_port) == (
        3,
        2181,
        6379,
        9092,
        8000,
    )
    assert cfg.bootstrap == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert StackConfig.from_json(json.loads(json.dumps(cfg.to_json()))) == cfg


def test_logs_prints_each_process_prefixed(redis_stack):
    env, _, _ = redis_stack
    result = quill_stack(env, "logs", "redis", "supervisor", "-n", "3")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines and all(line.split("|")[0].strip() in ("redis", "supervisor") for line in lines)


@pytest.mark.slow
def test_whole_stack_with_one_broker_up_status_down(tmp_path):
    """What `make up BROKERS=1` does, in a temp state dir on free ports."""
    metrics_port = str(ports.free_port())
    env = stack_env(tmp_path, QUILL_BROKERS="1", QUILL_METRICS_BASE_PORT=metrics_port)
    up = quill_stack(env, "up", timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        status = quill_stack(env, "status")
        assert status.returncode == 0, status.stdout
        rows = status_table(status.stdout)
        assert set(rows) >= {"zookeeper", "redis", "broker-1", "worker", "console"}
        assert all(row[3] == "yes" for row in rows.values()), status.stdout

        broker_port = env["QUILL_BROKER_BASE_PORT"]
        kcat = subprocess.run(
            ["kcat", "-b", f"127.0.0.1:{broker_port}", "-L", "-J", "-m", "10"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert kcat.returncode == 0, kcat.stderr
        metadata = json.loads(kcat.stdout)
        assert [b["id"] for b in metadata["brokers"]] == [1]
        assert health.http_ok("127.0.0.1", int(env["QUILL_CONSOLE_PORT"]))[0]
        # broker 1 serves its metrics on QUILL_METRICS_BASE_PORT
        scraped = subprocess.run(
            ["curl", "-sf", f"http://127.0.0.1:{metrics_port}/metrics"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert "kafka_server_replicamanager_partitioncount" in scraped.stdout
    finally:
        down = quill_stack(env, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert_nothing_left(tmp_path)
