"""The local driver: brokers run under this machine's quill-stack supervisor, in the
state dir the worker shares with it (QUILL_STATE_DIR); a restart is
`quill-stack restart broker-N` (SIGTERM: controlled shutdown; the supervisor starts it
again and answers once it is healthy); a decommissioned broker is stopped with
`quill-stack stop broker-N` (kept down until `quill-stack start`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from quill_stack import state


class RestartError(Exception):
    pass


def _state_dir() -> Path:
    from django.conf import settings

    return Path(getattr(settings, "STATE_DIR", None) or os.environ.get("QUILL_STATE_DIR", ".state"))


class LocalDriver:
    name = "local"

    def __init__(self, state_dir: Path | None = None):
        self.state_dir = Path(state_dir) if state_dir else _state_dir()

    def available(self) -> str | None:
        if not state.running_pid(self.state_dir):
            return (
                f"No quill-stack supervisor runs the brokers from {self.state_dir}: start the "
                "stack with `make up` (or set QUILL_RESTART_DRIVER=docker under compose)."
            )
        return None

    def pid(self, broker_id: int) -> int | None:
        status = state.read_status(self.state_dir) or {}
        entry = status.get("services", {}).get(f"broker-{broker_id}") or {}
        return entry.get("pid")

    def restart(self, broker_id: int, timeout: float) -> dict:
        return self._command("restart", broker_id, timeout)

    def stop(self, broker_id: int, timeout: float) -> dict:
        """`quill-stack stop broker-N`: controlled shutdown, and the supervisor keeps it
        down (decommission)."""
        return self._command("stop", broker_id, timeout)

    def _command(self, command: str, broker_id: int, timeout: float) -> dict:
        why = self.available()
        if why:
            raise RestartError(why)
        exe = shutil.which("quill-stack") or str(Path(sys.executable).with_name("quill-stack"))
        old = self.pid(broker_id)
        run = subprocess.run(
            [exe, command, f"broker-{broker_id}", "--timeout", str(int(timeout))],
            env={**os.environ, "QUILL_STATE_DIR": str(self.state_dir)},
            capture_output=True,
            text=True,
            timeout=timeout + 30,
        )
        text = (run.stdout + run.stderr).strip().splitlines()
        message = text[-1] if text else f"exit {run.returncode}"
        if run.returncode != 0:
            raise RestartError(f"quill-stack {command} broker-{broker_id}: {message}")
        return {"old_pid": old, "new_pid": self.pid(broker_id), "message": message}
