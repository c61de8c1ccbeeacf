"""The state dir: the supervisor's lock/pid file, its status file and leftovers.

`supervisor.pid` holds the pid of the running supervisor, which keeps an exclusive
flock on it for its whole life: a pid file nobody holds the lock on is stale.
`status.json` lists the children (pid and kernel start time) for `status` and `down`.
Every child also carries QUILLSTACK_OWNER=<state dir> in its environment. Together they
let `down` verify that nothing is left, and clean up after a supervisor that was killed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import tempfile
import time
from pathlib import Path

from quill_stack.ports import describe_pid


class AlreadyRunning(RuntimeError):
    def __init__(self, pid: int | None, state_dir: Path):
        self.pid = pid
        super().__init__(
            f"the Quill stack is already running (pid {pid or '?'}, state dir {state_dir}); "
            "see `make status`, or stop it with `make down`"
        )


def pid_path(state_dir: Path) -> Path:
    return state_dir / "supervisor.pid"


def status_path(state_dir: Path) -> Path:
    return state_dir / "status.json"


def logs_dir(state_dir: Path) -> Path:
    return state_dir / "logs"


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


class StackLock:
    """The supervisor's exclusive lock, with its pid written in the file."""

    def __init__(self, state_dir: Path):
        self.path = pid_path(state_dir)
        self.state_dir = state_dir
        self.fd: int | None = None
        self.previous_pid: int | None = None

    def acquire(self) -> None:
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise AlreadyRunning(_read_pid(self.path), self.state_dir) from None
        self.previous_pid = _read_pid(self.path)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(self.fd)
        self.fd = None


def running_pid(state_dir: Path) -> int | None:
    """The pid of the live supervisor for this state dir, or None."""
    path = pid_path(state_dir)
    if not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid(path) or -1
    finally:
        os.close(fd)
    return None


def is_running(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


OWNER_ENV = "QUILLSTACK_OWNER"  # not QUILL_*: brokers read QUILL_* as config overrides


def owner_env(state_dir: Path) -> dict[str, str]:
    """The env var that marks a child (and its descendants) as this state dir's."""
    return {OWNER_ENV: str(state_dir)}


def start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (field 22 of /proc/pid/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def owned_processes(state_dir: Path, status: dict | None = None) -> list[int]:
    """Live processes of this state dir: the children recorded in `status` (default:
    status.json; pid and start time must both match, so a recycled pid is not ours)
    plus any process carrying OWNER_ENV (redis-server and celery rewrite their
    /proc/<pid>/environ for their process titles, hence both ways)."""
    status = read_status(state_dir) if status is None else status
    found = {
        entry["pid"]
        for entry in (status or {}).get("services", {}).values()
        if entry.get("pid")
        and is_running(entry["pid"])
        and start_time(entry["pid"]) == entry.get("start_time")
    }
    marker = f"{OWNER_ENV}={state_dir}".encode() + b"\0"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            environ = b"\0" + (proc / "environ").read_bytes() + b"\0"
        except OSError:
            continue
        if b"\0" + marker in environ and is_running(int(proc.name)):
            found.add(int(proc.name))
    return sorted(found)


def read_status(state_dir: Path) -> dict | None:
    try:
        return json.loads(status_path(state_dir).read_text())
    except (OSError, ValueError):
        return None


def write_status(state_dir: Path, status: dict) -> None:
    write_private(status_path(state_dir), json.dumps(status, indent=1).encode())


def kill_leftovers(state_dir: Path, status: dict | None = None, grace: float = 10.0) -> list[str]:
    """SIGTERM (then SIGKILL) every process still running for this state dir."""
    status = read_status(state_dir) if status is None else status
    pids = owned_processes(state_dir, status)
    described = [f"pid {pid} ({describe_pid(pid)})" for pid in pids]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while owned_processes(state_dir, status) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in owned_processes(state_dir, status):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return described


def clean_stale(state_dir: Path) -> list[str]:
    """If no supervisor holds the lock, remove its pid/status files and stop any child
    it left behind. Returns sentences describing what was cleaned."""
    if running_pid(state_dir) is not None:
        return []
    notes = clean_stale_children(state_dir, _read_pid(pid_path(state_dir)))
    with contextlib.suppress(FileNotFoundError):
        pid_path(state_dir).unlink()
    return notes


def clean_stale_children(state_dir: Path, stale_pid: int | None) -> list[str]:
    """Stop the children a dead supervisor left running and remove its status file."""
    status = read_status(state_dir)
    notes = [
        f"stopped {what}, left behind by a supervisor that is gone"
        for what in kill_leftovers(state_dir, status or {})
    ]
    stale_pid = stale_pid or (status or {}).get("supervisor_pid")
    if stale_pid and stale_pid != os.getpid():
        notes.append(f"removed the stale pid file of supervisor pid {stale_pid} (not running)")
    with contextlib.suppress(FileNotFoundError):
        status_path(state_dir).unlink()
    return notes


def private_dir(path: Path) -> Path:
    """`path` (made if missing, parents too) with mode 0700: the state dir holds the
    console's database (sessions, API tokens), keys and passwords, for its owner only."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    return path


def private_file(path: Path) -> Path:
    """`path` (created empty if missing) with mode 0600, in a private directory: SQLite
    keeps the mode of the database for its journal and WAL files."""
    private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Create `path` readable by its owner only (keys, passwords)."""
    private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def create_private_once(path: Path, data: bytes) -> bytes:
    """`path`'s bytes, made from `data` (mode 0600) if it does not exist yet. Safe when
    several processes start at once (the console and its monitor): the file appears
    whole or not at all (written aside, then linked), and every racer but the first
    reads the winner's bytes."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.link(tmp, path)
        return data
    except FileExistsError:
        return path.read_bytes()
    finally:
        os.unlink(tmp)
