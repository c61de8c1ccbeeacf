"""`quill-stack restart NAME`: one broker of a running stack stopped with SIGTERM (its
controlled shutdown), started again and healthy, through the supervisor."""

from __future__ import annotations

from quill_stack import health, state
from tests.group_helpers import wait_until
from tests.stack_helpers import quill_stack, service_entry, stack_env


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

        unknown = quill_stack(env, "restart", "broker-7")
        assert unknown.returncode == 1
        assert "no process named 'broker-7' in this stack" in unknown.stderr
        assert "broker-1" in unknown.stderr
    finally:
        quill_stack(env, "down", timeout=180)
    assert state.owned_processes(tmp_path) == []
    stopped = quill_stack(env, "restart", "broker-1")
    assert stopped.returncode == 1 and "the stack is not running" in stopped.stderr
