"""The socket server: Kafka framing on asyncio, requests answered in order.

Each connection reads size-prefixed frames into a queue and one task per connection
handles them in arrival order (Kafka mutes a channel while a request is in flight; we
queue instead, up to ``queued.max.requests``, then stop reading). A handler may answer
with a future (an acks=all produce, its appends done, waiting for the ISR): the next
requests are served meanwhile, their appends stay in arrival order, and responses
still leave in request order, held behind the waiting one. A response is
either bytes or a list of parts, where a part may be a ``FileRegion`` that goes from
the segment file to the socket with sendfile, never through Python bytes.

Garbage (negative or absurd sizes, an unknown API key or version, a body that does
not parse) closes that connection only; the broker and every other connection carry
on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..protocol.messages import ProtocolError

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class FileRegion:
    """``count`` bytes of file descriptor ``fd`` from ``position``: sent with sendfile."""

    fd: int
    position: int
    count: int


class _FdFile:
    """The file-object face asyncio's sendfile wants, over a bare descriptor."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *_args) -> None:  # asyncio repositions the file after sending; we use offsets
        return None


Response = bytes | list[bytes | FileRegion] | None
# at most this many answers waiting for a future per connection; then reading waits too
MAX_PENDING_RESPONSES = 1000
Handler = Callable[["Connection", bytes], Awaitable[Response]]


def then(fut: asyncio.Future, fn: Callable) -> asyncio.Future:
    """A future of ``fn(fut's result)``, computed by a done-callback: a deferred
    response without a task per request. Errors and cancellation pass through."""
    out = fut.get_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if out.done():
            return
        if f.cancelled():
            out.cancel()
            return
        exc = f.exception()
        if exc is not None:
            out.set_exception(exc)
            return
        try:
            out.set_result(fn(f.result()))
        except Exception as err:  # noqa: BLE001 - handed to whoever awaits ``out``
            out.set_exception(err)

    fut.add_done_callback(done)
    return out


class Connection(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: SocketServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._buf = bytearray()
        self._frames: deque[bytes] = deque()
        self._worker: asyncio.Task | None = None
        self._outbox: deque = deque()  # responses held behind a future, in request order
        self._sender: asyncio.Task | None = None
        self._closed = False
        self._reading_paused = False
        self._mute_s = 0.0  # a quota's throttle time: no reads for that long after the response
        self._can_write = asyncio.Event()
        self._can_write.set()
        # asyncio's own loops have loop.sendfile; uvloop does not, so bytes go through pread
        self.use_sendfile = server.use_sendfile and isinstance(
            asyncio.get_event_loop(), asyncio.BaseEventLoop
        )

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._can_write.set()
        self.server.connections.discard(self)
        for task in (self._worker, self._sender):
            if task is not None and not task.done():
                task.cancel()
        for item in self._outbox:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._outbox.clear()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        max_size = self.server.max_request_size
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 8 or size > max_size:
                self.abort(
                    f"request size {size} is outside [8, socket.request.max.bytes={max_size}]"
                )
                return
            if end - pos - 4 < size:
                break
            self._frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        if self._frames and (self._worker is None or self._worker.done()):
            self._worker = asyncio.ensure_future(self._work())
        if len(self._frames) >= self.server.queued_max_requests and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()

    # -- request processing ----------------------------------------------------------
    async def _work(self) -> None:
        frames = self._frames
        try:
            while frames and not self._closed:
                frame = frames.popleft()
                if self._reading_paused and len(frames) < self.server.queued_max_requests // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                try:
                    response = await self.server.handler(self, frame)
                except ProtocolError as exc:
                    self.abort(str(exc))
                    return
                if isinstance(response, asyncio.Future) or self._outbox:
                    await self._hold(response)
                elif response is not None:
                    await self.send(response)
                if self._mute_s > 0:
                    await self._muted()
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug in a handler: drop this client, keep the broker
            log.exception("unexpected error serving %s; closing the connection", self.peer)
            self.abort("internal error")

    async def _hold(self, response: Response | asyncio.Future) -> None:
        """Queue a response behind the ones still waiting; one task sends them in order."""
        self._outbox.append(response)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send_in_order())
        if len(self._outbox) >= MAX_PENDING_RESPONSES:
            await asyncio.wait([self._sender])  # back-pressure: finish these first

    async def _send_in_order(self) -> None:
        outbox = self._outbox
        try:
            while outbox and not self._closed:
                response = outbox[0]
                if isinstance(response, asyncio.Future):
                    response = await response
                outbox.popleft()
                if response is not None:
                    await self.send(response)
        except asyncio.CancelledError:
            pass
        except ProtocolError as exc:
            self.abort(str(exc))
        except Exception:  # a bug in a handler: drop this client, keep the broker
            log.exception("unexpected error serving %s; closing the connection", self.peer)
            self.abort("internal error")

    def mute_after_response(self, throttle_ms: int) -> None:
        """KIP-219: once this request's response is out, read and serve nothing more
        from this client for ``throttle_ms`` (Kafka mutes the channel)."""
        self._mute_s = max(self._mute_s, throttle_ms / 1000.0)

    async def _muted(self) -> None:
        mute_s, self._mute_s = self._mute_s, 0.0
        self.transport.pause_reading()
        try:
            await asyncio.sleep(mute_s)
        finally:
            if not self._closed and not self._reading_paused:
                self.transport.resume_reading()

    async def send(self, response: Response) -> None:
        if self._closed:
            return
        if not self._can_write.is_set():
            await self._can_write.wait()
        if isinstance(response, bytes | bytearray):
            self.transport.write(response)
            return
        loop = asyncio.get_running_loop()
        for part in response:
            if self._closed:
                return
            if isinstance(part, FileRegion):
                if part.count == 0:
                    continue
                if self.use_sendfile:
                    await loop.sendfile(self.transport, _FdFile(part.fd), part.position, part.count)
                else:
                    self.transport.write(os.pread(part.fd, part.count, part.position))
            else:
                self.transport.write(part)

    def abort(self, reason: str) -> None:
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._frames.clear()
            for item in self._outbox:
                if isinstance(item, asyncio.Future):
                    item.cancel()
            self._outbox.clear()
            if self.transport is not None:
                self.transport.abort()


class SocketServer:
    """Listens on one address and hands each frame to ``handler``."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_request_size: int,
        queued_max_requests: int = 500,
        send_buffer: int = -1,
        receive_buffer: int = -1,
    ) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.queued_max_requests = queued_max_requests
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.connections: set[Connection] = set()
        self.use_sendfile = hasattr(os, "sendfile")
        self._servers: list[asyncio.base_events.Server] = []

    async def listen(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: Connection(self), host or None, port, reuse_address=True, backlog=1024
        )
        self._servers.append(server)
        for sock in server.sockets:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.receive_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        return server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self._servers:
            await server.wait_closed()
