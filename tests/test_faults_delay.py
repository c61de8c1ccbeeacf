"""The slow, lossy link of the netem fault on a kernel without sch_netem: an NFQUEUE rule
in a host's namespace and faults.delay holding each packet (faults/nemesis.slow_link),
between two real namespaces on their own network (q81, apart from the suite's q77)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from faults import nemesis, netns
from tests.faults_helpers import require_hosts

ECHO = """
import socket, sys
server = socket.create_server(("0.0.0.0", 7007))
print("ready", flush=True)
while True:  # one connection after another
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(65536):
        conn.sendall(data)
    conn.close()
"""
CLIENT = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], 7007), timeout=120)
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for n in range(int(sys.argv[2])):  # one round trip at a time: each its own packets
    sent = b"%06d" % n
    began = time.monotonic()
    conn.sendall(sent)
    got = b""
    while len(got) < len(sent):
        got += conn.recv(64)
    print(got.decode(), f"{(time.monotonic() - began) * 1000:.1f}", flush=True)
"""


class _Cluster:  # what slow_link and heal_network need of a HostCluster
    def __init__(self, net: netns.Network, state_dir: Path):
        self.net, self.state_dir = net, state_dir


@pytest.fixture
def two_hosts(tmp_path):
    require_hosts()
    netns.use_network(81)
    try:
        with netns.Network() as net:
            server, client = net.add_host("srv"), net.add_host("cli")
            echo = subprocess.Popen([*server.exec_prefix(), sys.executable, "-c", ECHO],
                                    stdout=subprocess.PIPE, text=True)  # fmt: skip
            try:
                assert echo.stdout.readline().strip() == "ready"
                yield _Cluster(net, tmp_path), server, client
            finally:
                echo.kill()
                echo.wait()
                nemesis.heal_network(_Cluster(net, tmp_path))
    finally:
        netns.use_network(netns.DEFAULT_NETWORK)


def _round_trips(client: netns.Host, server: netns.Host, n: int) -> list[tuple[str, float]]:
    out = client.ns(sys.executable, "-c", CLIENT, server.address, str(n)).stdout
    return [(word, float(ms)) for word, ms in (line.split() for line in out.splitlines())]


def test_every_packet_leaving_the_host_waits_its_delay_and_the_stream_stays_whole(two_hosts):
    cluster, server, client = two_hosts
    assert nemesis.slow_link(server, 120, 0.0, seed=1, log_dir=cluster.state_dir) == "nfqueue"
    rules = server.ns("iptables", "-S", "OUTPUT").stdout
    assert "-j NFQUEUE --queue-num 0 --queue-bypass" in rules
    trips = _round_trips(client, server, 10)
    # every answer left the server through the queue: none came back sooner than 120 ms
    assert [word for word, _ in trips] == [f"{n:06d}" for n in range(10)]
    assert min(ms for _, ms in trips) >= 120.0, trips
    nemesis.heal_network(cluster)
    assert "NFQUEUE" not in server.ns("iptables", "-S", "OUTPUT").stdout
    assert nemesis.DELAYERS == []
    # the link is whole again: the echo answers (no rule, no reader left behind)
    assert [word for word, _ in _round_trips(client, server, 3)] == ["000000", "000001", "000002"]


def test_lost_packets_are_resent_by_tcp_and_nothing_arrives_changed(two_hosts):
    cluster, server, client = two_hosts
    nemesis.slow_link(server, 20, 0.3, seed=7, log_dir=cluster.state_dir)
    trips = _round_trips(client, server, 30)
    assert [word for word, _ in trips] == [f"{n:06d}" for n in range(30)]
    proc = nemesis.DELAYERS[0]
    nemesis.heal_network(cluster)
    counts = proc.stdout.read()
    # 30 % of the server's packets were dropped (its answers, ACKs and the FIN's); TCP
    # sent them again, so every answer came, in order, with the bytes sent
    let_through, dropped = map(
        int, re.match(r"stopped: (\d+) let through, (\d+) dropped", counts).groups()
    )
    assert dropped > 0 and let_through >= 30, counts


def test_a_bad_delay_is_refused_with_a_message():
    done = subprocess.run([sys.executable, "-m", "faults.delay", "--delay-ms", "-5"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2
    assert "--delay-ms must be 0-10000" in done.stderr
