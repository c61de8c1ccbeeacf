"""The supervisor: start the stack in order, restart what dies, stop it all in reverse.

Like docker-compose's `restart: unless-stopped`: a child that exits is started again
after an exponential backoff (1s, 2s, 4s ... 30s, reset once it has run for a minute),
and every restart is logged to supervisor.log and to the child's own log. One child can
be restarted on request (`quill-stack restart NAME`, quill_stack/restart.py). SIGINT
(Ctrl-C) or SIGTERM (`quill-stack down`) stops every child, newest group first.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from quill_stack import secure, state
from quill_stack.ports import port_holder, port_in_use
from quill_stack.process import ManagedProcess, StartError, describe_exit, stamp
from quill_stack.restart import RestartRequests
from quill_stack.services import ServiceSpec, StackConfig, build_stack

BACKOFF_BASE = 1.0
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds of running that reset the backoff

PORT_ENV = {
    "zookeeper": "QUILL_ZK_PORT",
    "redis": "QUILL_REDIS_PORT",
    "broker": "QUILL_BROKER_BASE_PORT",
    "console": "QUILL_CONSOLE_PORT",
}


class PreflightError(RuntimeError):
    """The stack cannot start (missing package, port taken); nothing was started."""


class StopRequested(Exception):
    """SIGINT/SIGTERM arrived while the stack was still starting."""


def backoff_delay(failures: int) -> float:
    """Seconds to wait before restart number `failures` (1-based) in a row."""
    return min(BACKOFF_BASE * 2 ** max(failures - 1, 0), BACKOFF_MAX)


def preflight(specs: list[ServiceSpec]) -> None:
    """Refuse to start when a Debian package is missing or a port is taken."""
    missing = {}
    for spec in specs:
        for req in spec.requires:
            if req.missing():
                missing.setdefault(req.package, req.what)
    if missing:
        lines = [f"  {package} (provides {what})" for package, what in missing.items()]
        raise PreflightError(
            "missing Debian package(s):\n" + "\n".join(lines) + "\nRun `make install` "
            f"(or: apt-get install -y {' '.join(missing)})."
        )
    problems = []
    seen: dict[int, str] = {}
    for spec in specs:
        if spec.port is None:
            continue
        hint = PORT_ENV.get(spec.kind, "")
        if spec.port in seen:
            problems.append(
                f"  port {spec.port} is configured for both {seen[spec.port]} and {spec.name}"
            )
        seen[spec.port] = spec.name
        if port_in_use(spec.port, spec.host):
            holder = port_holder(spec.port) or "another process (not visible to us)"
            problems.append(
                f"  port {spec.port} ({spec.name}) is already in use by {holder}; stop that "
                f"process or choose another port{' with ' + hint + '=...' if hint else ''}"
            )
    if problems:
        raise PreflightError("cannot start the stack:\n" + "\n".join(problems))


@dataclass
class Entry:
    """The supervisor's book-keeping for one child."""

    proc: ManagedProcess
    state: str = "stopped"  # starting | running | backoff | stopped
    restarts: int = 0
    failures: int = 0  # exits in a row without a stable run
    started_mono: float = 0.0
    restart_at: float = 0.0
    start_time: int | None = None

    def as_json(self) -> dict:
        return {
            "pid": self.proc.pid if self.state in ("starting", "running") else None,
            "start_time": self.start_time,
            "port": self.proc.spec.port,
            "state": self.state,
            "restarts": self.restarts,
            "started_at": self.proc.started_at,
            "log": str(self.proc.spec.log_path),
        }


class Supervisor:
    def __init__(
        self,
        cfg: StackConfig,
        specs: list[ServiceSpec] | None = None,
        out: TextIO | None = sys.stdout,
    ):
        self.cfg = cfg
        specs = build_stack(cfg) if specs is None else specs
        owner = state.owner_env(cfg.state_dir)
        self.entries = [Entry(ManagedProcess(spec, owner)) for spec in specs]
        self.out = out
        self.phase = "starting"
        self.error = ""
        self.stop_requested = False
        self.lock = state.StackLock(cfg.state_dir)
        self.log_path = state.logs_dir(cfg.state_dir) / "supervisor.log"
        self.restart_requests = RestartRequests(self)  # `quill-stack restart NAME`

    # ------------------------------------------------------------ output

    def log(self, message: str) -> None:
        line = f"{stamp()} quill-stack: {message}"
        if self.out is not None:
            print(line, file=self.out, flush=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(line + "\n")

    def write_status(self) -> None:
        state.write_status(
            self.cfg.state_dir,
            {
                "supervisor_pid": os.getpid(),
                "phase": self.phase,
                "error": self.error,
                "config": self.cfg.to_json(),
                "services": {e.proc.name: e.as_json() for e in self.entries},
            },
        )

    # ------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Start everything, supervise until told to stop, stop everything. Exit code."""
        self.lock.acquire()
        for note in state.clean_stale_children(self.cfg.state_dir, self.lock.previous_pid):
            self.log(note)
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            return self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.lock.release()

    def _run(self) -> int:
        code = 0
        try:
            preflight([e.proc.spec for e in self.entries])
            self.write_status()
            self._start_groups()
            self.phase = "ready"
            self.write_status()
            self.log(f"stack is up ({len(self.entries)} processes); state dir {self.cfg.state_dir}")
            self._announce()
            self._supervise()
        except (PreflightError, StartError, OSError) as exc:
            self.phase, self.error, code = "failed", str(exc), 1
            self.log(f"error: {exc}")
        except StopRequested:
            pass
        finally:
            self.phase = "stopping"
            self._stop_all()
            state.status_path(self.cfg.state_dir).unlink(missing_ok=True)
        return code

    def _on_signal(self, signum: int, frame) -> None:
        if not self.stop_requested:
            self.log(f"received {signal.Signals(signum).name}; stopping the stack")
        self.stop_requested = True
        if self.phase == "starting":
            raise StopRequested

    def _groups(self) -> list[list[Entry]]:
        ordered = sorted(self.entries, key=lambda e: e.proc.spec.group)
        return [list(g) for _, g in itertools.groupby(ordered, key=lambda e: e.proc.spec.group)]

    def _start_groups(self) -> None:
        for group in self._groups():
            for entry in group:
                self._start(entry)
            self.write_status()
            for entry in group:
                entry.proc.wait_healthy()
                self.log(f"{entry.proc.name} is healthy (pid {entry.proc.pid})")

    def _start(self, entry: Entry) -> None:
        entry.state = "starting"
        entry.proc.start()
        entry.state = "running"
        entry.started_mono = time.monotonic()
        entry.start_time = state.start_time(entry.proc.pid)
        self.log(
            f"started {entry.proc.name} (pid {entry.proc.pid}), log {entry.proc.spec.log_path}"
        )

    def _announce(self) -> None:
        if any(e.proc.spec.kind == "console" for e in self.entries):
            self.log(f"console: {secure.console_url(self.cfg)}")
        if any(e.proc.spec.kind == "broker" for e in self.entries):
            self.log(f"bootstrap servers: {self.cfg.bootstrap}{secure.client_hint(self.cfg)}")

    def _supervise(self) -> None:
        last_write = 0.0
        while not self.stop_requested:
            changed = False
            for entry in self.entries:
                changed |= self._tend(entry, time.monotonic())
            self.restart_requests.poll()
            if changed or time.monotonic() - last_write > 5:
                self.write_status()
                last_write = time.monotonic()
            time.sleep(0.2)

    def _tend(self, entry: Entry, now: float) -> bool:
        """Notice an exit and schedule a restart, or restart when the backoff is over."""
        proc = entry.proc
        if entry.state == "running":
            code = proc.poll()
            if code is None:
                return False
            if now - entry.started_mono >= STABLE_AFTER:
                entry.failures = 0
            entry.failures += 1
            delay = backoff_delay(entry.failures)
            entry.state, entry.restart_at = "backoff", now + delay
            message = (
                f"{proc.name} (pid {proc.pid}) exited with code {describe_exit(code)}; "
                f"restart #{entry.restarts + 1} in {delay:.0f}s"
            )
            self.log(message)
            proc.note(message)
            return True
        if entry.state == "backoff" and now >= entry.restart_at:
            entry.restarts += 1
            try:
                self._start(entry)
            except (OSError, StartError) as exc:
                entry.failures += 1
                entry.state = "backoff"
                entry.restart_at = now + backoff_delay(entry.failures)
                self.log(f"restarting {proc.name} failed: {exc}")
            return True
        return False

    def _stop_all(self) -> None:
        """Stop every child, last group first; the processes of a group together."""
        for group in reversed(self._groups()):
            running = [e for e in group if e.proc.alive()]
            for entry in running:
                entry.proc.terminate()
            for entry in running:
                code = entry.proc.wait_stopped()
                self.log(f"stopped {entry.proc.name} (exit {describe_exit(code)})")
            for entry in group:
                entry.state = "stopped"
        self.log("all processes stopped")


def log_offset(state_dir: Path) -> int:
    try:
        return (state.logs_dir(state_dir) / "supervisor.log").stat().st_size
    except OSError:
        return 0
