"""`quill-stack restart|stop|start NAME`: one broker of a running stack stopped with
SIGTERM (its controlled shutdown), started again and healthy, or kept down until started,
through the supervisor."""

from __future__ import annotations

import time

from quill_stack import health, state
from tests.stack_helpers import quill_stack, service_entry, stack_env
from tests.wait_helpers import wait_until


def test_restart_one_broker_through_the_supervisor(tmp_path):
    env = stack_env(tmp_path, QUILL_SERVICES="zookeeper,broker", QUILL_BROKERS="1")
    up = quill_stack(env, "up", timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        before = service_entry(tmp_path, "broker-1")
        result = quill_stack(env, "restart", "broker-1", timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr

        def restarted():
            entry = service_entry(tmp_path, "broker-1")
            return entry.get("state") == "running" and entry.get("pid") not in (None, before["pid"])

        wait_until(restarted, timeout=30, what="status.json to show the new broker")
        after = service_entry(tmp_path, "broker-1")
        assert after["restarts"] == before["restarts"] + 1
        assert f"restarted broker-1: pid {before['pid']} -> {after['pid']}, healthy" in (
            result.stdout
        )
        port = int(env["QUILL_BROKER_BASE_PORT"])
        assert health.api_versions("127.0.0.1", port)[0]
        broker_log = (state.logs_dir(tmp_path) / "broker-1.log").read_text()
        assert "broker 1 stopped cleanly" in broker_log  # SIGTERM, not a kill
        supervisor_log = (state.logs_dir(tmp_path) / "supervisor.log").read_text()
        assert f"restarting broker-1 (pid {before['pid']}) on request" in supervisor_log

        # stop keeps it down (a decommissioned broker), start brings it back
        stopped = quill_stack(env, "stop", "broker-1", timeout=300)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert f"stopped broker-1 (pid {after['pid']})" in stopped.stdout
        wait_until(lambda: service_entry(tmp_path, "broker-1").get("state") == "stopped",
                   timeout=30, what="status.json to show broker-1 stopped")  # fmt: skip
        assert not health.api_versions("127.0.0.1", port, timeout=1.0)[0]
        time.sleep(2.0)  # ten turns of the supervisor's loop: it must not restart it
        assert service_entry(tmp_path, "broker-1")["state"] == "stopped"
        assert service_entry(tmp_path, "broker-1")["restarts"] == after["restarts"]
        again = quill_stack(env, "start", "broker-7")
        assert again.returncode == 1 and "no process named 'broker-7'" in again.stderr
        started = quill_stack(env, "start", "broker-1", timeout=300)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "started broker-1: pid " in started.stdout and ", healthy" in started.stdout
        assert health.api_versions("127.0.0.1", port)[0]
        twice = quill_stack(env, "start", "broker-1")
        assert twice.returncode == 1 and "broker-1 is running, not stopped" in twice.stderr

        unknown = quill_stack(env, "restart", "broker-7")
        assert unknown.returncode == 1
        assert "no process named 'broker-7' in this stack" in unknown.stderr
        assert "broker-1" in unknown.stderr
    finally:
        quill_stack(env, "down", timeout=180)
    assert state.owned_processes(tmp_path) == []
    stopped = quill_stack(env, "restart", "broker-1")
    assert stopped.returncode == 1 and "the stack is not running" in stopped.stderr
