"""`quill-stack restart|stop|start NAME`: one process of a running stack, through its
supervisor (`stop` keeps it down, no restart, until `start`: a decommissioned broker).

The command and the supervisor talk through files in the state dir, as the rest of the
stack does (status.json, supervisor.pid): the command writes
``restart/<name>.<nonce>.request`` and waits for ``restart/<name>.<nonce>.done``
(``{"ok", "old_pid", "new_pid", "message"}``). The supervisor, which owns the child,
picks requests up in its loop; a thread per restart sends SIGTERM (a broker then does
its controlled shutdown: leaderships move away first), waits for the exit (SIGKILL after
the service's stop timeout), lets the loop start it again (as after a crash, without the
backoff; counted in RESTARTS) and waits until healthy (a broker registered anew in
ZooKeeper and answering ApiVersions). Other children are tended meanwhile.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from quill_stack import state
from quill_stack.process import StartError, describe_exit

if TYPE_CHECKING:
    from quill_stack.supervisor import Entry, Supervisor

REQUEST, DONE = ".request", ".done"


def requests_dir(state_dir: Path) -> Path:
    return Path(state_dir) / "restart"


def _write(path: Path, body: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(body))
    tmp.replace(path)


# ---------------------------------------------------------------- the command's side


def request_restart(state_dir: Path, name: str, timeout: float, action: str = "restart") -> dict:
    """Ask the running supervisor to ``action`` (restart, stop, start) ``name``; its
    answer, or a timeout answer."""
    folder = requests_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{name}.{uuid.uuid4().hex[:12]}"
    body = {"name": name, "action": action, "requested_at": time.time()}
    _write(folder / (stem + REQUEST), body)
    done = folder / (stem + DONE)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done.exists():
            answer = json.loads(done.read_text())
            done.unlink(missing_ok=True)
            return answer
        if not state.running_pid(state_dir):
            return {"ok": False, "message": "the supervisor stopped before answering"}
        time.sleep(0.2)
    (folder / (stem + REQUEST)).unlink(missing_ok=True)
    return {
        "ok": False,
        "message": f"no answer within {timeout:.0f}s; see `quill-stack logs supervisor {name}`",
    }


# ---------------------------------------------------------------- the supervisor's side


class RestartRequests:
    """Polled by the supervisor's loop; one thread per request (restart, stop, start)."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.sup = supervisor
        self.folder = requests_dir(supervisor.cfg.state_dir)
        self.threads: dict[str, threading.Thread] = {}

    def poll(self) -> None:
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*" + REQUEST)):
            stem = path.name[: -len(REQUEST)]
            name = stem.rsplit(".", 1)[0]
            try:
                action = json.loads(path.read_text()).get("action", "restart")
            except (OSError, ValueError, AttributeError):
                action = "restart"
            path.unlink(missing_ok=True)
            self._take(name, action, self.folder / (stem + DONE))

    def _take(self, name: str, action: str, done: Path) -> None:
        entries = {e.proc.name: e for e in self.sup.entries}
        entry = entries.get(name)
        target = {"restart": self._restart, "stop": self._stop, "start": self._start}.get(action)
        if entry is None or target is None:
            names = ", ".join(entries) or "none"
            message = (
                f"no process named {name!r} in this stack (its processes: {names})"
                if entry is None
                else f"unknown action {action!r} (restart, stop, start)"
            )
            _write(done, {"ok": False, "message": message})
            return
        busy = self.threads.get(name)
        if busy is not None and busy.is_alive():
            _write(done, {"ok": False, "message": f"{name} is busy with an earlier request"})
            return
        if action == "start" and entry.state != "stopped":
            _write(done, {"ok": False, "message": f"{name} is {entry.state}, not stopped"})
            return
        thread = threading.Thread(
            target=target, args=(entry, done), name=f"{action}-{name}", daemon=True
        )
        self.threads[name] = thread
        thread.start()

    def _terminate(self, entry: Entry, why: str) -> int | None:
        """SIGTERM (a broker's controlled shutdown) and wait; the old pid."""
        proc = entry.proc
        old_pid = proc.pid if proc.alive() else None
        entry.state = "stopping"  # the supervisor's loop leaves it alone meanwhile
        self.sup.log(f"{why} {proc.name} (pid {old_pid}) on request: SIGTERM")
        proc.note(f"{why} on request (quill-stack): stopping")
        proc.terminate()
        code = proc.wait_stopped()
        self.sup.log(f"stopped {proc.name} (exit {describe_exit(code)})")
        return old_pid

    def _stop(self, entry: Entry, done: Path) -> None:
        old_pid = self._terminate(entry, "stopping")
        entry.state = "stopped"  # not restarted until `quill-stack start`
        _write(done, {"ok": True, "old_pid": old_pid, "message": f"stopped {entry.proc.name} "
                      f"(pid {old_pid}); `quill-stack start {entry.proc.name}` starts it again"})  # fmt: skip

    def _restart(self, entry: Entry, done: Path) -> None:
        old_pid = self._terminate(entry, "restarting")
        self._start(entry, done, old_pid, "restarted")

    def _start(self, entry: Entry, done: Path, old_pid: int | None = None, verb="started") -> None:
        sup, proc = self.sup, entry.proc
        if sup.stop_requested:
            entry.state = "stopped"
            _write(done, {"ok": False, "old_pid": old_pid, "message": "the stack is stopping"})
            return
        # the supervisor's loop starts it, on its own thread: a child started here would
        # die with this thread (setpriv --pdeathsig follows the thread that forked it)
        entry.restart_at = time.monotonic()
        entry.state = "backoff"
        deadline = time.monotonic() + proc.spec.start_timeout
        try:
            while not (entry.state == "running" and proc.pid != old_pid and proc.alive()):
                if sup.stop_requested or time.monotonic() > deadline:
                    raise StartError(f"{proc.name} was not started again")
                time.sleep(0.05)
            proc.wait_healthy()
        except StartError as exc:
            sup.log(f"starting {proc.name} failed: {exc}")
            _write(done, {"ok": False, "old_pid": old_pid, "message": str(exc)})
            return
        sup.log(f"{proc.name} is healthy again (pid {proc.pid})")
        if old_pid is None:
            message = f"{verb} {proc.name}: pid {proc.pid}, healthy"
        else:
            message = f"{verb} {proc.name}: pid {old_pid} -> {proc.pid}, healthy"
        _write(done, {"ok": True, "old_pid": old_pid, "new_pid": proc.pid, "message": message})
