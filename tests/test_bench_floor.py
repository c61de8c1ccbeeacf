"""bench/floor.py's frame splitting and canned responses, and bench/profile_roles.py's
attribution of py-spy stacks to roles (the benchmarks themselves never run in the suite)."""

from __future__ import annotations

import struct

from bench import floor, profile_roles
from broker.protocol.messages import parse_response


def test_split_frames_keeps_a_partial_frame():
    buf = bytearray(struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"d")
    assert floor.split_frames(buf) == [b"abc"]
    assert bytes(buf) == struct.pack(">i", 2) + b"d"
    buf += b"e" + struct.pack(">i", 0)
    assert floor.split_frames(buf) == [b"de", b""]
    assert buf == bytearray()


def test_canned_responses_decode_and_base_offset_is_where_patched():
    canned = floor.canned_responses(port=9092)
    _, meta = parse_response(3, 12, canned[(3, 12)][4:])
    assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(1, "127.0.0.1", 9092)]
    assert [(t.name, [p.leader_id for p in t.partitions]) for t in meta.topics] == [("one", [1])]
    for version in (3, 8, 9):
        frame = bytearray(canned[(0, version)])
        struct.pack_into(">i", frame, 4, 77)
        struct.pack_into(">q", frame, floor.base_offset_at(version), 123456)
        correlation_id, body = parse_response(0, version, bytes(frame[4:]))
        (part,) = body.responses[0].partition_responses
        assert (correlation_id, part.index, part.error_code, part.base_offset) == (77, 0, 0, 123456)


def _stack(*frames: tuple[str, str]) -> list[tuple[str, str]]:
    entry = [("<module>", "broker/__main__.py"), ("main", "broker/server/main.py")]
    return entry + [("BaseEventLoop._run_once", "asyncio/base_events.py"), *frames]


def test_role_of_stacks():
    raw = (
        "_run_code (<frozen runpy>:88);<module> (broker/__main__.py:5);"
        "main (broker/server/main.py:109);EpollSelector.select (selectors.py:468)"
    )
    assert profile_roles.frames(raw)[-1] == ("EpollSelector.select", "selectors.py")
    assert profile_roles.role_of(profile_roles.frames(raw))[0] == "event loop: in select()"
    produce = _stack(
        ("Connection._work", "broker/server/network.py"),
        ("KafkaApis.handle", "broker/server/apis.py"),
        ("handle_produce", "broker/server/handlers/produce.py"),
    )
    assert profile_roles.role_of(produce)[0] == "leader produce handling"
    fetcher = _stack(("ReplicaFetcher._fetch_once", "broker/replica/fetcher.py"))
    assert profile_roles.role_of(fetcher)[0] == "follower fetch rounds"
    write = _stack(("Connection.send", "broker/server/network.py"))
    assert profile_roles.role_of(write)[0] == "network layer"
    assert profile_roles.role_of(_stack(("Handle._run", "asyncio/events.py")))[0] == (
        "event loop: callbacks, tasks"
    )
    flush = _stack(("Log.unflushed_messages", "broker/log/log.py"))
    assert profile_roles.role_of(flush) == ("other", "Log.unflushed_messages (log/log.py)")
    roles, _ = profile_roles.parse_raw(raw + " 7\n")
    assert roles["event loop: in select()"] == 7
