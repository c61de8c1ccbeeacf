"""The broker's inter-broker client (broker/client/connection.py) against a real TCP
server on a real loop: frames that arrive a byte at a time or several to a read,
answers out of request order, garbage, and a peer that hangs up. The server speaks
Kafka framing by hand, so each case is exact."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.client.connection import BrokerConnection, ConnectionClosed
from broker.protocol.messages import build, encode_response, peek_header, response_schema


def api_versions_answer(correlation_id: int, error_code: int) -> bytes:
    body = build(response_schema(18, 0), {"error_code": error_code, "api_keys": []})
    return encode_response(18, 0, correlation_id, body)


async def read_request(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return peek_header(await reader.readexactly(size))[2]  # the correlation id


async def serve(handler) -> tuple[asyncio.AbstractServer, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def connected(port: int) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", port, "client-test")
    await conn.connect()
    return conn


def test_answers_split_byte_by_byte_and_out_of_order_reach_their_requests() -> None:
    async def main() -> None:
        async def handler(reader, writer):
            first, second = await read_request(reader), await read_request(reader)
            # the second answered first, both in one write
            writer.write(api_versions_answer(second, 35) + api_versions_answer(first, 0))
            third = await read_request(reader)
            for byte in api_versions_answer(third, 0):  # a byte per write
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0)
            await reader.read()

        server, port = await serve(handler)
        conn = await connected(port)
        a = asyncio.ensure_future(conn.request(18, 0, {}))
        b = asyncio.ensure_future(conn.request(18, 0, {}))
        first, second = await asyncio.gather(a, b)
        assert (first.error_code, second.error_code) == (0, 35)
        third = await conn.request(18, 0, {})
        assert third.error_code == 0 and conn.connected
        await conn.close()
        assert not conn.connected
        server.close()

    asyncio.run(main())


@pytest.mark.parametrize("reply", [struct.pack(">i", 2) + b"\0\0", b""])
def test_garbage_or_a_hang_up_fails_the_waiting_request_and_the_connection(reply) -> None:
    async def main() -> None:
        async def handler(reader, writer):
            await read_request(reader)
            writer.write(reply)  # a frame too short for a correlation id, or nothing
            await writer.drain()
            writer.close()

        server, port = await serve(handler)
        conn = await connected(port)
        with pytest.raises(ConnectionClosed):
            await conn.request(18, 0, {}, timeout_s=10)
        assert not conn.connected
        with pytest.raises(ConnectionClosed):  # later requests fail at once
            await conn.request(18, 0, {})
        await conn.close()
        server.close()

    asyncio.run(main())


def test_close_fails_requests_still_waiting() -> None:
    async def main() -> None:
        async def handler(reader, writer):
            await read_request(reader)
            await reader.read()  # never answers

        server, port = await serve(handler)
        conn = await connected(port)
        waiting = asyncio.ensure_future(conn.request(18, 0, {}))
        await asyncio.sleep(0.05)
        await conn.close()
        with pytest.raises(ConnectionClosed):
            await waiting
        server.close()

    asyncio.run(main())


def test_each_request_times_out_on_its_own_deadline_and_later_answers_still_land() -> None:
    """One timer serves every waiting request: a short timeout sent after a long one
    fails first, with TimeoutError; the long one, answered late, still gets its answer,
    and so does a request sent after the timeout."""

    async def main() -> None:
        answer = asyncio.Event()

        async def handler(reader, writer):
            slow, _quick = await read_request(reader), await read_request(reader)
            await answer.wait()  # quick's timeout has passed
            writer.write(api_versions_answer(slow, 35))
            later = await read_request(reader)
            writer.write(api_versions_answer(later, 0))
            await writer.drain()
            await reader.read()

        server, port = await serve(handler)
        conn = await connected(port)
        slow = asyncio.ensure_future(conn.request(18, 0, {}, timeout_s=30))
        await asyncio.sleep(0)
        quick = asyncio.ensure_future(conn.request(18, 0, {}, timeout_s=0.2))
        with pytest.raises(TimeoutError):
            await quick
        assert not slow.done() and conn.connected
        answer.set()
        assert (await slow).error_code == 35
        assert (await conn.request(18, 0, {}, timeout_s=5)).error_code == 0
        await conn.close()
        server.close()

    asyncio.run(main())


def test_send_now_hands_the_answer_over_in_the_read_callback_that_brings_it() -> None:
    """send_now (a follower's chained fetch rounds): the answer reaches its function
    inside the transport's read callback, before anything the loop had queued runs; a
    timeout and a hang-up reach the error function, once each, and leave nothing
    pending."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        arrived = asyncio.Event()

        async def handler(reader, writer):
            first = await read_request(reader)
            await arrived.wait()
            writer.write(api_versions_answer(first, 35))
            await read_request(reader)  # never answered: times out
            await read_request(reader)  # answered by a hang-up
            writer.close()

        server, port = await serve(handler)
        conn = await connected(port)
        seen: list = []
        ran_between: list = []

        def on_answer(answer) -> None:
            seen.append(("answer", answer.error_code, bool(ran_between)))

        assert conn.can_send_now()
        conn.send_now(18, 0, {}, 10.0, None, on_answer, lambda exc: seen.append(exc))
        await asyncio.sleep(0.05)

        def queued() -> None:  # queued before the answer's read; must run after it
            ran_between.append(True)

        original = conn._answer

        def answer_then_queue(frame: bytes) -> None:
            original(frame)
            loop.call_soon(queued)

        conn._answer = answer_then_queue
        arrived.set()
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        assert seen == [("answer", 35, False)]  # in the read callback, not a later turn
        assert conn._pending == {}
        conn._answer = original

        errors: list = []
        conn.send_now(18, 0, {}, 0.2, None, seen.append, errors.append)
        for _ in range(300):
            if errors:
                break
            await asyncio.sleep(0.01)
        assert [type(e) for e in errors] == [TimeoutError] and conn._pending == {}

        conn.send_now(18, 0, {}, 30.0, None, seen.append, errors.append)
        for _ in range(300):
            if len(errors) > 1:
                break
            await asyncio.sleep(0.01)
        assert [type(e) for e in errors] == [TimeoutError, ConnectionClosed]
        assert len(seen) == 1 and not conn.connected and not conn.can_send_now()
        await asyncio.sleep(0.3)  # the timeout of the one that failed must not fire again
        assert len(errors) == 2
        await conn.close()
        server.close()

    asyncio.run(main())
