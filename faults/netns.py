"""Hosts on one machine: Linux network namespaces joined by a bridge.

Every host (a broker, a ZooKeeper server, a client) is a namespace ``q77-<name>`` with
one veth into the bridge ``q77br``, on the private subnet 10.77.0.0/24 (the bridge itself
is 10.77.0.1, so the harness in the root namespace reaches every host). Nothing here
ever addresses anything outside that subnet. ``use_network(78)`` switches to ``q78`` and
10.78.0.0/24, so two harnesses (a soak and the suite) can run side by side. Faults act inside a host's namespace:
iptables rules for partitions, tc netem for slow and lossy links.

``Network.cleanup_stale()`` removes whatever an earlier, killed run left behind; a
``Network`` removes its namespaces, veths, bridge and the FORWARD rule in ``close()``.
Needs root and iproute2, iptables (scripts/install.sh brings them).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

DEFAULT_NETWORK = 77
PREFIX = BRIDGE = SUBNET = BRIDGE_ADDRESS = ""
FORWARD_RULE: list[str] = []


def use_network(number: int) -> None:
    """Name everything q<number> and use 10.<number>.0.0/24 (a private subnet)."""
    global PREFIX, BRIDGE, SUBNET, BRIDGE_ADDRESS, FORWARD_RULE
    if not 1 <= number <= 254:
        raise ValueError(f"network number {number} is outside 1-254")
    PREFIX = f"q{number}"
    BRIDGE = f"{PREFIX}br"
    SUBNET = f"10.{number}.0"
    BRIDGE_ADDRESS = f"{SUBNET}.1"
    # Docker sets FORWARD's policy to DROP with bridge netfilter on: traffic between two
    # ports of our bridge passes through FORWARD, so the bridge gets an ACCEPT of its own.
    FORWARD_RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"]


use_network(DEFAULT_NETWORK)
TOOLS = ("ip", "iptables", "tc")


class NetError(RuntimeError):
    """A namespace, link or rule could not be set up; the message has the command."""


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise NetError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result


@dataclass(frozen=True)
class Host:
    """One namespace on the bridge."""

    name: str
    address: str

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def veth(self) -> str:
        return f"{PREFIX}v{self.name}"[:15]  # the root-side end; Linux names stop at 15

    def exec_prefix(self) -> list[str]:
        """argv prefix that runs a command inside this host (ip netns exec execs it, so
        the pid and signals are the command's own)."""
        return ["ip", "netns", "exec", self.netns]

    def ns(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return run(*self.exec_prefix(), *argv, check=check)


class Network:
    """The bridge and the hosts on it."""

    def __init__(self) -> None:
        self.hosts: dict[str, Host] = {}
        self._next = 10

    def __enter__(self) -> Network:
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        cleanup_stale()
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        run("iptables", "-I", *FORWARD_RULE)

    def add_host(self, name: str) -> Host:
        host = Host(name, f"{SUBNET}.{self._next}")
        self._next += 1
        run("ip", "netns", "add", host.netns)
        self.hosts[name] = host
        run("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
            "netns", host.netns)  # fmt: skip
        run("ip", "link", "set", host.veth, "master", BRIDGE)
        run("ip", "link", "set", host.veth, "up")
        host.ns("ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        host.ns("ip", "link", "set", "eth0", "up")
        host.ns("ip", "link", "set", "lo", "up")
        return host

    def close(self) -> None:
        cleanup_stale()


def cleanup_stale() -> None:
    """Remove every namespace and veth of this network, its bridge and FORWARD rule."""
    names = run("ip", "netns", "list", check=False).stdout.split("\n")
    for line in names:
        name = line.split(" ")[0]
        if name.startswith(f"{PREFIX}-"):
            run("ip", "netns", "del", name, check=False)  # takes its veth pair with it
    links = run("ip", "-o", "link", "show", check=False).stdout.splitlines()
    for line in links:
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name.startswith(PREFIX):
            run("ip", "link", "del", name, check=False)
    while run("iptables", "-D", *FORWARD_RULE, check=False).returncode == 0:
        pass
