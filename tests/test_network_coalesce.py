"""Responses that are ready together leave in one write (broker/server/network.py):
the acks=all answers one replica fetch completes, and the answers to requests read
together. Driven on a real asyncio loop through Connection's own entry points, with a
transport that records what it is given; the order of responses is Kafka's (request
order) in every case."""

from __future__ import annotations

import asyncio
import struct

from broker.server.network import Connection, SocketServer


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name, default=None):
        return default

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True


def frame(n: int) -> bytes:
    body = struct.pack(">ii", n, 0)  # Kafka's smallest request is 8 bytes
    return struct.pack(">i", len(body)) + body


def answer(body: bytes) -> bytes:
    return b"R" + body


async def settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def connect(handler) -> tuple[Connection, RecordingTransport]:
    server = SocketServer(handler, max_request_size=1 << 20)
    conn = Connection(server)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def connect_delayed() -> tuple[Connection, RecordingTransport, dict[int, asyncio.Future]]:
    """A connection whose every request is answered by a future (an acks=all produce),
    kept by the request's number."""
    loop = asyncio.get_running_loop()
    futures: dict[int, asyncio.Future] = {}

    async def handler(_conn, data: bytes):
        fut = futures[struct.unpack_from(">i", data)[0]] = loop.create_future()
        return fut

    return (*connect(handler), futures)


def test_delayed_answers_completed_together_leave_in_one_write() -> None:
    async def main() -> None:
        conn, transport, futures = connect_delayed()
        conn.data_received(b"".join(frame(i) for i in range(5)))
        await settle()
        assert transport.writes == []  # all five wait on their futures
        futures[0].set_result(answer(b"0"))
        await settle()
        assert transport.writes == [b"R0"]  # alone: out at once
        for i in (1, 2, 3):  # one pass completes three (a HW move)
            futures[i].set_result(answer(str(i).encode()))
        await settle()
        assert transport.writes == [b"R0", b"R1R2R3"]
        futures[4].set_result(answer(b"4"))
        await settle()
        assert transport.writes == [b"R0", b"R1R2R3", b"R4"]

    asyncio.run(main())


def test_out_of_order_completion_still_answers_in_request_order() -> None:
    async def main() -> None:
        conn, transport, futures = connect_delayed()
        conn.data_received(b"".join(frame(i) for i in range(3)))
        await settle()
        futures[2].set_result(answer(b"2"))
        futures[1].set_result(answer(b"1"))
        await settle()
        assert transport.writes == []  # held behind request 0
        futures[0].set_result(answer(b"0"))
        await settle()
        assert transport.writes == [b"R0R1R2"]

    asyncio.run(main())


def test_requests_read_together_are_answered_in_one_write() -> None:
    async def main() -> None:
        async def handler(_conn, data: bytes):
            return answer(str(struct.unpack_from(">i", data)[0]).encode())

        conn, transport = connect(handler)
        conn.data_received(b"".join(frame(i) for i in range(4)))
        await settle()
        assert transport.writes == [b"R0R1R2R3"]
        conn.data_received(frame(9))
        await settle()
        assert transport.writes == [b"R0R1R2R3", b"R9"]

    asyncio.run(main())


def test_an_answer_held_for_a_slow_next_request_goes_out_on_the_next_loop_turn() -> None:
    """The next request's handler suspends: the answer before it is not kept waiting."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        release = loop.create_future()

        async def handler(_conn, data: bytes):
            n = struct.unpack_from(">i", data)[0]
            if n == 1:
                await release  # e.g. a request waiting on the controller
            return answer(str(n).encode())

        conn, transport = connect(handler)
        conn.data_received(frame(0) + frame(1))
        await settle()
        assert transport.writes == [b"R0"]
        release.set_result(None)
        await settle()
        assert transport.writes == [b"R0", b"R1"]

    asyncio.run(main())
