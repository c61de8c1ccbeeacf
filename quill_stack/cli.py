"""`quill-stack run|up|down|status|logs`: the local stack without Docker.

run     start everything in the foreground; Ctrl-C stops it all
up      the same, detached; returns once every process is healthy
down    stop everything (no restarts) and verify that nothing is left
status  one line per process: pid, port, healthy, restarts, uptime
logs    the last lines of each process's log (-f to follow)
restart NAME  restart one process (SIGTERM: a broker's controlled shutdown), wait until healthy
stop NAME     stop one process and keep it down (no restarts); start NAME brings it back

Configuration comes from QUILL_* env vars (see README.md, "Configuration").
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from quill_stack import secure, state
from quill_stack.logs import follow, log_files, print_tails
from quill_stack.restart import request_restart
from quill_stack.services import PROJECT_ROOT, ConfigError, StackConfig, build_stack
from quill_stack.supervisor import PreflightError, Supervisor, log_offset, preflight
from quill_stack.system_services import move_off_taken_defaults

UP_TIMEOUT = 300.0
DOWN_TIMEOUT = 120.0
NOT_RUNNING = 3


def config_env(cfg: StackConfig) -> dict[str, str]:
    """The env vars that make a child `quill-stack` see the same StackConfig."""
    return {
        "QUILL_STATE_DIR": str(cfg.state_dir),
        "QUILL_BROKERS": str(cfg.brokers),
        "QUILL_HOST": cfg.host,
        "QUILL_ZK_PORT": str(cfg.zk_port),
        "QUILL_ZK_NODES": str(cfg.zk_nodes),
        "QUILL_REDIS_PORT": str(cfg.redis_port),
        "QUILL_BROKER_BASE_PORT": str(cfg.broker_base_port),
        "QUILL_CONSOLE_PORT": str(cfg.console_port),
        "QUILL_METRICS_BASE_PORT": str(cfg.metrics_base_port),
        "QUILL_SERVICES": ",".join(cfg.services),
        "QUILL_SECURITY": cfg.security,
    }


def load_config(args: argparse.Namespace) -> StackConfig:
    env = dict(os.environ)
    if getattr(args, "services", None):
        env["QUILL_SERVICES"] = args.services
    if getattr(args, "brokers", None) is not None:
        env["QUILL_BROKERS"] = str(args.brokers)
    return StackConfig.from_env(env)


def fail(message: str, code: int = 1) -> int:
    print(f"quill-stack: {message}", file=sys.stderr)
    return code


def report_stale(state_dir: Path) -> None:
    for note in state.clean_stale(state_dir):
        print(f"quill-stack: {note}")


# ---------------------------------------------------------------- run / up


def avoid_system_services(cfg: StackConfig) -> StackConfig:
    """Move ZooKeeper and Redis off default ports a system service holds (and say so)."""
    cfg, notes = move_off_taken_defaults(cfg, os.environ)
    for note in notes:
        print(f"quill-stack: {note}")
    return cfg


def cmd_run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    if not args.detached:
        pid = state.running_pid(cfg.state_dir)
        if pid:
            return fail(str(state.AlreadyRunning(pid, cfg.state_dir)))
        report_stale(cfg.state_dir)
        cfg = avoid_system_services(cfg)
    supervisor = Supervisor(cfg, out=None if args.detached else sys.stdout)
    try:
        return supervisor.run()
    except state.AlreadyRunning as exc:
        return fail(str(exc))


class LogStreamer:
    """Echo what the detached supervisor writes to supervisor.log, from an offset."""

    def __init__(self, path: Path, offset: int):
        self.path, self.offset = path, offset

    def pump(self) -> None:
        try:
            with open(self.path, errors="replace") as f:
                f.seek(self.offset)
                data = f.read()
                self.offset = f.tell()
        except OSError:
            return
        if data:
            sys.stdout.write(data)
            sys.stdout.flush()


def cmd_up(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    pid = state.running_pid(cfg.state_dir)
    if pid:
        return fail(str(state.AlreadyRunning(pid, cfg.state_dir)))
    report_stale(cfg.state_dir)
    cfg = avoid_system_services(cfg)
    specs = build_stack(cfg)
    try:
        preflight(specs)
    except PreflightError as exc:
        return fail(str(exc))
    log_path = state.logs_dir(cfg.state_dir) / "supervisor.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    streamer = LogStreamer(log_path, log_offset(cfg.state_dir))
    print(
        f"quill-stack: starting {len(specs)} processes in the background (state dir {cfg.state_dir})"
    )
    with open(log_path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "quill_stack", "run", "--detached"],
            cwd=PROJECT_ROOT,
            env={**os.environ, **config_env(cfg)},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        return wait_until_up(cfg, child, streamer, args.timeout)
    except KeyboardInterrupt:
        print("quill-stack: interrupted; stopping what was started")
        stop_supervisor(child.pid, cfg.state_dir, streamer)
        return 130


def wait_until_up(cfg, child: subprocess.Popen, streamer: LogStreamer, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        streamer.pump()
        status = state.read_status(cfg.state_dir) or {}
        if status.get("supervisor_pid") == child.pid and status.get("phase") == "ready":
            print()
            print_status(cfg.state_dir, status)
            return 0
        if child.poll() is not None:
            streamer.pump()
            state.clean_stale(cfg.state_dir)
            return fail("the stack did not start (see the messages above); nothing is left running")
        time.sleep(0.2)
    streamer.pump()
    stop_supervisor(child.pid, cfg.state_dir, streamer)
    return fail(f"the stack was not healthy within {timeout:.0f}s; stopped it again")


# ---------------------------------------------------------------- down


def stop_supervisor(pid: int, state_dir: Path, streamer: LogStreamer | None) -> list[str]:
    """SIGTERM the supervisor, wait for it (SIGKILL after DOWN_TIMEOUT), then make sure
    that no process of this state dir is left. Returns what had to be killed by force."""
    snapshot = state.read_status(state_dir) or {}
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + DOWN_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        if streamer:
            streamer.pump()
        time.sleep(0.2)
    if streamer:
        streamer.pump()
    forced = []
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        forced.append(f"supervisor pid {pid} (did not stop within {DOWN_TIMEOUT:.0f}s)")
    forced += state.kill_leftovers(state_dir, snapshot)
    state.clean_stale(state_dir)
    return forced


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return state.is_running(pid)


def cmd_down(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    pid = state.running_pid(cfg.state_dir)
    if not pid:
        report_stale(cfg.state_dir)
        print(f"quill-stack: the stack is not running (state dir {cfg.state_dir})")
        return 0
    print(f"quill-stack: stopping the stack (supervisor pid {pid})")
    streamer = LogStreamer(
        state.logs_dir(cfg.state_dir) / "supervisor.log", log_offset(cfg.state_dir)
    )
    snapshot = state.read_status(cfg.state_dir) or {}
    forced = stop_supervisor(pid, cfg.state_dir, streamer)
    for what in forced:
        print(f"quill-stack: had to kill {what}")
    left = state.owned_processes(cfg.state_dir, snapshot)
    if left or _alive(pid):
        return fail(f"processes still running: {left}")
    print("quill-stack: stopped; no process of the stack is left running")
    return 0


# ---------------------------------------------------------------- status


def format_uptime(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def status_rows(status: dict) -> list[tuple[list[str], bool]]:
    cfg = StackConfig.from_json(status["config"])
    specs = {spec.name: spec for spec in build_stack(cfg)}
    entries = status.get("services", {})

    def row(name: str) -> tuple[list[str], bool]:
        entry = entries[name]
        pid = entry.get("pid")
        spec = specs.get(name)
        if not pid or not _alive(pid) or spec is None:
            ok, detail = False, entry.get("state", "stopped")
        else:
            ok, detail = spec.healthy(entry.get("started_at"))
        started = entry.get("started_at")
        uptime = format_uptime(time.time() - started) if started and pid else "-"
        cells = [name, str(pid or "-"), str(entry.get("port") or "-")]
        cells += ["yes" if ok else "no", str(entry.get("restarts", 0)), uptime]
        cells.append("" if ok else detail)
        return cells, ok

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(row, entries))


def print_status(state_dir: Path, status: dict) -> bool:
    rows = status_rows(status)
    header = ["NAME", "PID", "PORT", "HEALTHY", "RESTARTS", "UPTIME", ""]
    table = [header] + [cells for cells, _ in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    healthy = all(ok for _, ok in rows)
    phase = status.get("phase")
    print(f"\nsupervisor pid {status.get('supervisor_pid')}, {phase}, state dir {state_dir}")
    cfg = StackConfig.from_json(status["config"])
    names = {s.kind for s in build_stack(cfg)}
    if "console" in names:
        print(f"console: {secure.console_url(cfg)}")
    if "broker" in names:
        print(f"bootstrap servers: {cfg.bootstrap}{secure.client_hint(cfg)}")
    return healthy


def cmd_status(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    pid = state.running_pid(cfg.state_dir)
    if not pid:
        report_stale(cfg.state_dir)
        print(
            f"quill-stack: the stack is not running (state dir {cfg.state_dir}); start it with `make up`"
        )
        return NOT_RUNNING
    status = state.read_status(cfg.state_dir)
    if not status:
        print(f"quill-stack: supervisor pid {pid} is running but has not written its status yet")
        return 1
    return 0 if print_status(cfg.state_dir, status) else 1


# ---------------------------------------------------------------- logs


def cmd_logs(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    files = log_files(state.logs_dir(cfg.state_dir), args.names)
    if not files:
        return fail(
            f"no logs under {state.logs_dir(cfg.state_dir)} for {args.names or 'any process'}"
        )
    print_tails(files, args.lines)
    if args.follow:
        try:
            follow(files)
        except KeyboardInterrupt:
            pass
    return 0


# ---------------------------------------------------------------- restart


def cmd_restart(args: argparse.Namespace) -> int:
    """restart, stop or start one process (args.command), through the supervisor."""
    cfg = load_config(args)
    pid = state.running_pid(cfg.state_dir)
    if not pid:
        report_stale(cfg.state_dir)
        return fail(
            f"the stack is not running (state dir {cfg.state_dir}); nothing to {args.command}"
        )
    doing = {"restart": "restarting", "stop": "stopping", "start": "starting"}[args.command]
    print(f"quill-stack: {doing} {args.name} (supervisor pid {pid})")
    answer = request_restart(cfg.state_dir, args.name, args.timeout, action=args.command)
    if not answer.get("ok"):
        return fail(f"{doing} {args.name} failed: {answer.get('message')}")
    print(f"quill-stack: {answer['message']}")
    return 0


# ---------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quill-stack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, help_text in (
        ("run", cmd_run, "run the stack in the foreground (Ctrl-C stops it)"),
        ("up", cmd_up, "start the stack in the background; wait until healthy"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--services", help="comma-separated names or kinds (e.g. zookeeper,redis)")
        p.add_argument("--brokers", type=int, help="number of brokers (QUILL_BROKERS)")
        p.set_defaults(func=func)
        if name == "run":
            p.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
        else:
            p.add_argument("--timeout", type=float, default=UP_TIMEOUT)
    sub.add_parser("down", help="stop the stack").set_defaults(func=cmd_down)
    sub.add_parser("status", help="show every process and its health").set_defaults(func=cmd_status)
    p = sub.add_parser("logs", help="show the processes' logs")
    p.add_argument("names", nargs="*", help="processes (default: all), e.g. broker-1 supervisor")
    p.add_argument("-n", "--lines", type=int, default=20)
    p.add_argument("-f", "--follow", action="store_true")
    p.set_defaults(func=cmd_logs)
    for name, help_text in (
        ("restart", "restart one process (SIGTERM, start) and wait until it is healthy"),
        ("stop", "stop one process (SIGTERM) and keep it down until `start`"),
        ("start", "start a process `stop` took down, and wait until it is healthy"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("name", help="the process, e.g. broker-2")
        p.add_argument("--timeout", type=float, default=UP_TIMEOUT)
        p.set_defaults(func=cmd_restart)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        return fail(str(exc), 2)


if __name__ == "__main__":
    sys.exit(main())
