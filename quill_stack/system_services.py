"""Fresh machines: installing Debian's `redis-server` (and `zookeeperd`) starts the
system's own service on the default port (6379, 2181), which the stack's own Redis and
ZooKeeper then cannot bind. scripts/install.sh stops the services its own install
started; a service that was there before (or came back) is left alone: when ZooKeeper's
or Redis's port was not chosen (QUILL_ZK_PORT / QUILL_REDIS_PORT unset) and another
process holds the default, the stack takes the next free port above it and says so.
A port that was chosen and is taken stays an error (preflight names the holder)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from quill_stack.ports import port_holder, port_in_use
from quill_stack.services import StackConfig

# kind -> (StackConfig field, env var, what the system service is)
MOVABLE = {
    "zookeeper": ("zk_port", "QUILL_ZK_PORT", "ZooKeeper"),
    "redis": ("redis_port", "QUILL_REDIS_PORT", "Redis"),
}
SEARCH = 100  # ports tried above the default


def wanted(cfg: StackConfig, kind: str) -> bool:
    return not cfg.services or kind in cfg.services


def next_free_port(port: int, host: str, avoid: set[int]) -> int | None:
    for candidate in range(port + 1, min(port + SEARCH, 65535) + 1):
        if candidate not in avoid and not port_in_use(candidate, host):
            return candidate
    return None


def move_off_taken_defaults(
    cfg: StackConfig, env: Mapping[str, str]
) -> tuple[StackConfig, list[str]]:
    """`cfg` with ZooKeeper and Redis moved off default ports held by another process,
    and a sentence for each move."""
    notes = []
    broker_ports = set(range(cfg.broker_base_port, cfg.broker_base_port + cfg.brokers))
    avoid = {cfg.zk_port, cfg.redis_port, cfg.console_port} | broker_ports
    for kind, (field, var, what) in MOVABLE.items():
        port = getattr(cfg, field)
        if env.get(var) or not wanted(cfg, kind) or not port_in_use(port, cfg.host):
            continue
        holder = port_holder(port) or "a process we cannot see"
        moved = next_free_port(port, cfg.host, avoid)
        if moved is None:
            continue  # preflight names the port and its holder
        avoid.add(moved)
        cfg = replace(cfg, **{field: moved})
        notes.append(
            f"port {port} is held by {holder}, likely the system's own {what} service "
            f"(installing the Debian package starts it); the stack's {kind} uses port "
            f"{moved} instead and the console and workers follow. Set {var} to choose a "
            f"port, or stop that service if it is not needed."
        )
    return cfg, notes
