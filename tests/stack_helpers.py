"""Helpers for tests that run `quill-stack` itself: a state dir on free ports, the
command as a subprocess, and the supervisor's status.json."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from quill_stack import ports, services, state
from quill_stack.process import child_env
from quill_stack.services import PROJECT_ROOT


def stack_env(state_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUILL_")}
    zk, redis, console, broker = ports.free_ports(4)
    env.update(
        QUILL_STATE_DIR=str(state_dir),
        QUILL_ZK_PORT=str(zk),
        QUILL_REDIS_PORT=str(redis),
        QUILL_CONSOLE_PORT=str(console),
        QUILL_BROKER_BASE_PORT=str(broker),
        QUILL_BROKERS="0",
        QUILL_METRICS_BASE_PORT="0",  # the tests that start brokers set their own
    )
    env.update(extra)
    return env


def quill_stack(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "quill_stack", *args],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def service_entry(state_dir: Path, name: str) -> dict:
    return (state.read_status(state_dir) or {}).get("services", {}).get(name, {})


def create_admin(state_dir) -> str:
    """`manage.py createadmin` against the console's database in state_dir."""
    spec = services.console_spec(state_dir, services.app_env(state_dir, "redis://x", "x", "x"), 1)
    out = subprocess.run(
        [sys.executable, "manage.py", "createadmin"],
        cwd=PROJECT_ROOT,
        env=child_env(spec),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return re.search(r"password: (\S+)", out).group(1)
