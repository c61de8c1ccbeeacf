"""The ZooKeeper clients' select (broker/zk/poll_handler.py): select.select's answers
(which kazoo's selector_select gives too, as kazoo calls it) on one poll(2) call,
descriptors above select(2)'s 1,024 included, and a real ZooKeeper session driven
through it."""

from __future__ import annotations

import os
import resource
import select
import socket

import pytest
from kazoo.handlers.utils import selector_select

from broker.zk.poll_handler import PollingHandler, poll_select
from broker.zk.security import zk_client


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("select_fn", [select.select, selector_select, poll_select])
def test_the_same_answers_as_select(select_fn, pair) -> None:
    a, b = pair
    assert select_fn([a], [], [], 0) == ([], [], [])  # nothing to read yet
    assert select_fn([], [a], [], 0) == ([], [a], [])  # room to write
    b.sendall(b"x")
    assert select_fn([a, a.fileno()], [], [], 0.5) == ([a, a.fileno()], [], [])
    assert select_fn([b], [a], [], 0) == ([], [a], [])
    assert a.recv(1) == b"x"
    b.close()  # a hang-up is readable: the read reports it
    readable, _w, _x = select_fn([a], [], [], 0.5)
    assert readable == [a] and a.recv(1) == b""
    with pytest.raises(ValueError):
        select_fn([a], [], [], -1)
    with pytest.raises(TypeError):
        select_fn([a], [], [], "1")


def test_read_and_write_asked_of_one_socket_are_answered_apart(pair) -> None:
    a, b = pair
    b.sendall(b"z")
    assert poll_select([a], [a], [], 0.5) == select.select([a], [a], [], 0.5) == ([a], [a], [])


def test_a_descriptor_above_1024_is_polled(pair) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2100:
        pytest.fail(f"the open files limit ({hard}) leaves no room for descriptor 2000")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2100), hard))
    a, b = pair
    high = os.dup2(a.fileno(), 2000)
    try:
        b.sendall(b"y")
        assert poll_select([high], [], [], 1.0) == ([high], [], [])
    finally:
        os.close(high)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_zookeeper_session_runs_on_it(zookeeper) -> None:
    client = zk_client(zookeeper.address)
    assert isinstance(client.handler, PollingHandler)
    client.start(timeout=30)
    try:
        client.ensure_path("/poll-handler")
        client.set("/poll-handler", b"\x00\x01" * 5000)
        data, stat = client.get("/poll-handler")
        assert data == b"\x00\x01" * 5000 and stat.version == 1
        client.delete("/poll-handler")
        assert client.exists("/poll-handler") is None
    finally:
        client.stop()
        client.close()
