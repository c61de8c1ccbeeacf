"""Ports: find free ones, tell whether one is taken, and by which process."""

from __future__ import annotations

import contextlib
import os
import random
import socket
from pathlib import Path

#: picked below Linux's ephemeral range (32768-60999 by default): a port the kernel hands
#: out for port 0 is also one it may give an outgoing connection before our server binds
#: it (CI once saw a broker fail with EADDRINUSE that way)
PICK_RANGE = (20000, 32767)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    return free_ports(1, host)[0]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports from PICK_RANGE, all held open together while picking."""
    low, high = PICK_RANGE
    picked: list[int] = []
    with contextlib.ExitStack() as stack:
        for _ in range(50 * count + 100):
            if len(picked) == count:
                return picked
            port = random.randint(low, high)
            if port in picked:
                continue
            sock = stack.enter_context(socket.socket())
            try:
                sock.bind((host, port))
            except OSError:
                continue
            picked.append(port)
        if len(picked) == count:
            return picked
    raise OSError(f"no {count} free ports in {low}-{high} on {host}")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when binding (host, port) fails, i.e. a server could not listen there."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def port_holder(port: int) -> str | None:
    """'pid N (command line)' of the process listening on `port`, if we can see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # gone, or not ours to look into
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:  # closed since the listing: the others still count
                continue
            if target in wanted:
                return f"pid {proc.name} ({describe_pid(int(proc.name))})"
    return None


def describe_pid(pid: int) -> str:
    """The command line of `pid`, shortened, or '?' when it is gone or hidden."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = " ".join(raw.replace(b"\0", b" ").decode(errors="replace").split())
    return text if len(text) <= 120 else text[:117] + "..."
