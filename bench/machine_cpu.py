"""Who used the machine's CPU while a benchmark row ran.

On this 2-core machine three brokers and the client share two cores, and a row's tail
latency depends on everything else that ran meanwhile. Two things outside Quill take
bursts of CPU here: the sandbox VM's agent (PID 1, process_api, at nice -10) scanning
open descriptors, and the kernel's DAMON thread (kdamond.0, a pageout scheme) taking
20-25 ms at a time every few seconds. A row therefore reports the brokers', the
client's and every other process's CPU over the same window, so that each figure
carries its machine state with it (docs/benchmarks.md, seventh session).

CPU comes from utime + stime in /proc/PID/stat (all threads, clock ticks). A process
that starts and ends inside the window is not seen; one that starts inside it counts
from zero.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Proc:
    name: str  # comm: a kernel worker's changes with the work it does
    ppid: int
    ticks: int  # utime + stime
    started: int  # starttime, ticks after boot: tells a reused pid apart


@dataclass
class Snapshot:
    at: float
    procs: dict[int, Proc] = field(default_factory=dict)


def _read(pid: str) -> Proc | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return Proc(name, int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19]))


def snapshot() -> Snapshot:
    snap = Snapshot(time.monotonic())
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (proc := _read(entry)) is not None:
            snap.procs[int(entry)] = proc
    return snap


def descendants(root: int, *snaps: Snapshot) -> set[int]:
    """``root`` and every process below it in any of ``snaps``."""
    children: dict[int, set[int]] = {}
    for snap in snaps:
        for pid, proc in snap.procs.items():
            children.setdefault(proc.ppid, set()).add(pid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def used_seconds(before: Snapshot, after: Snapshot, pid: int) -> float:
    end = after.procs.get(pid)
    if end is None:
        return 0.0
    start = before.procs.get(pid)
    if start is None or start.started != end.started:
        return end.ticks * TICK_S  # started inside the window (or its pid was reused)
    return (end.ticks - start.ticks) * TICK_S


def cpu_between(
    before: Snapshot, after: Snapshot, brokers: list[int], root: int | None = None, top: int = 3
) -> dict:
    """Cores used between two snapshots by the brokers, by the client (``root``, this
    process by default, with librdkafka's threads), by the rest of ``root``'s tree
    (ZooKeeper, helper processes) and by every other process on the machine, with the
    busiest of those named."""
    root = os.getpid() if root is None else root
    wall = max(after.at - before.at, 1e-9)
    ours = descendants(root, before, after)
    broker_s = sum(used_seconds(before, after, pid) for pid in brokers)
    client_s = used_seconds(before, after, root)
    tree_s = sum(used_seconds(before, after, pid) for pid in ours - {root} - set(brokers))
    others = sorted(
        (
            (used_seconds(before, after, pid), pid, proc.name)
            for pid, proc in after.procs.items()
            if pid not in ours and pid not in brokers
        ),
        reverse=True,
    )
    return {
        "wall_s": wall,
        "brokers_cores": broker_s / wall,
        "client_cores": client_s / wall,
        "bench_rest_cores": tree_s / wall,
        "others_cores": sum(s for s, _, _ in others) / wall,
        "others_top": [
            {"pid": pid, "name": name, "seconds": round(s, 3)} for s, pid, name in others[:top] if s
        ],
    }


def cpu_model() -> str:
    """The processor's model name from /proc/cpuinfo, printed beside every figure."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def describe(cpu: dict) -> str:
    """One table cell: 'brokers 1.54, client 0.30, others 0.03 (kdamond.0 0.13 s)'."""
    tops = ", ".join(f"{t['name']} {t['seconds']:.2f} s" for t in cpu["others_top"])
    return (
        f"brokers {cpu['brokers_cores']:.2f}, client {cpu['client_cores']:.2f}, "
        f"others {cpu['others_cores']:.2f}" + (f" ({tops})" if tops else "")
    )
