"""Run one service (a ServiceSpec) as a child process: start, stop, kill, pause, wait.

Each child runs in its own session, so a Ctrl-C in the terminal reaches only the
supervisor, which then stops the children in order. Each child also gets a parent-death
signal (util-linux `setpriv --pdeathsig`), so nothing outlives a supervisor or a test
run that was itself killed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from pathlib import Path

from quill_stack.services import ServiceSpec
from quill_stack.state import write_private

SETPRIV = shutil.which("setpriv")


class StartError(RuntimeError):
    """A service exited or stayed unhealthy while starting; the message says why."""


# QUILL_* variables that tune a process rather than configure the stack pass through.
PASS_THROUGH = {"QUILL_LOG_LEVEL", "QUILL_EVENT_LOOP", "QUILL_PURE_PYTHON"}


def child_env(spec: ServiceSpec) -> dict[str, str]:
    """Our environment without QUILL_* (they would override broker properties and
    console settings behind the spec's back), plus the spec's own variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUILL_") or k in PASS_THROUGH}
    env.update(spec.env)
    return env


def tail(path: Path, lines: int = 30, offset: int = 0) -> str:
    """The last `lines` lines of the file, reading from byte `offset` on."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            last = deque(f, maxlen=lines)
    except OSError:
        return ""
    return b"".join(last).decode(errors="replace")


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


class ManagedProcess:
    """A child process for one service, with its output appended to spec.log_path."""

    def __init__(self, spec: ServiceSpec, owner_env: dict[str, str] | None = None):
        self.spec = spec
        self.owner_env = owner_env or {}
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.log_offset = 0  # where this start's output begins in the log

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def prepare(self) -> None:
        """Create directories and write config files."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        for path in self.spec.dirs:
            path.mkdir(parents=True, exist_ok=True)
        for path, text in self.spec.files.items():
            if self.spec.private_files:
                write_private(path, text.encode())
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def note(self, message: str) -> None:
        """Append a quill-stack line to the service's own log."""
        with open(self.spec.log_path, "a") as log:
            log.write(f"--- quill-stack {stamp()}: {message}\n")

    def start(self) -> None:
        self.prepare()
        self.log_offset = self.spec.log_path.stat().st_size if self.spec.log_path.exists() else 0
        env = {**child_env(self.spec), **self.owner_env}
        for argv in self.spec.pre_start:
            self._run_pre_start(argv, env)
        argv = list(self.spec.argv)
        if SETPRIV:
            argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        self.note("starting " + " ".join(self.spec.argv))
        with open(self.spec.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.spec.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started_at = time.time()

    def _run_pre_start(self, argv: list[str], env: dict[str, str]) -> None:
        self.note("running " + " ".join(argv))
        with open(self.spec.log_path, "ab") as log:
            result = subprocess.run(
                argv, cwd=self.spec.cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, timeout=300, check=False,
            )  # fmt: skip
        if result.returncode != 0:
            raise StartError(
                f"{self.name}: `{' '.join(argv)}` failed with exit code {result.returncode}; "
                f"last lines of {self.spec.log_path}:\n{self.log_tail()}"
            )

    def poll(self) -> int | None:
        """The exit code if the process has ended (reaping it), else None."""
        return self.proc.poll() if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's whole process group."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def terminate(self) -> None:
        """SIGTERM, continuing the process if it is paused so it can act on it."""
        if self.alive():
            self.signal(signal.SIGTERM)
            self.signal(signal.SIGCONT)

    def wait_stopped(self, timeout: float | None = None) -> int | None:
        """Wait for the exit after terminate(); SIGKILL when it takes over `timeout`."""
        if self.proc is None:
            return None
        timeout = self.spec.stop_timeout if timeout is None else timeout
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.note(f"did not stop within {timeout:.0f}s of SIGTERM; sending SIGKILL")
            return self.kill()
        self.signal(signal.SIGKILL)  # anything left in its process group
        return self.proc.returncode

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code."""
        self.terminate()
        return self.wait_stopped(timeout)

    def kill(self) -> int | None:
        """SIGKILL and reap."""
        if self.proc is None:
            return None
        self.signal(signal.SIGKILL)
        return self.proc.wait()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def healthy(self) -> tuple[bool, str]:
        if not self.alive():
            return False, "not running"
        return self.spec.healthy(self.started_at)

    def wait_healthy(self, timeout: float | None = None) -> None:
        """Block until healthy; StartError (with the log's last lines) if the process
        exits or stays unhealthy for `timeout` seconds (default spec.start_timeout)."""
        timeout = self.spec.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        detail = "not checked"
        delay = 0.05
        while time.monotonic() < deadline:
            code = self.poll()
            if code is not None:
                raise StartError(self._failure(f"exited with code {describe_exit(code)}"))
            ok, detail = self.spec.healthy(self.started_at)
            if ok:
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        raise StartError(self._failure(f"not healthy after {timeout:.0f}s ({detail})"))

    def _failure(self, what: str) -> str:
        return f"{self.name} {what}; last lines of {self.spec.log_path}:\n{self.log_tail()}"

    def log_tail(self, lines: int = 30) -> str:
        """The last lines this process (since its latest start) wrote to its log."""
        return tail(self.spec.log_path, lines, self.log_offset)


def describe_exit(code: int | None) -> str:
    """'0', '-9 (SIGKILL)', '143 (SIGTERM)' (a JVM's exit after SIGTERM)."""
    if code is None:
        return "?"
    number = -code if code < 0 else code - 128 if code > 128 else 0
    with contextlib.suppress(ValueError):
        if number:
            return f"{code} ({signal.Signals(number).name})"
    return str(code)


def start_all(procs: list[ManagedProcess]) -> None:
    """Start processes together and wait until all are healthy (StartError otherwise)."""
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.wait_healthy()
