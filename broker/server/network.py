"""The socket server: Kafka framing on asyncio, requests answered in order.

Each connection reads size-prefixed frames into a queue and handles them in arrival
order: in the read callback itself while they complete at once, on a task from the
first that must wait (Kafka mutes a channel while a request is in flight; we queue
instead, up to ``queued.max.requests``, then stop reading). A handler may answer
with a future (an acks=all produce, its appends done, waiting for the ISR): the next
requests are served meanwhile, their appends stay in arrival order, and responses
still leave in request order, held behind the waiting one. A response is
either bytes or a list of parts, where a part may be a ``FileRegion`` that goes from
the segment file to the socket with sendfile, never through Python bytes (regions
under ``SENDFILE_MIN_BYTES`` are cheaper copied). Responses ready together leave in
one write: the acks=all answers one replica fetch completes, and the answers to
requests read together (a linger-0 producer's answers went out one send each, each a
wake-up of the client).

A connection stops being read (is muted) for any of: its queue is full, its
responses pile up unread (the transport's buffer is past its high-water mark), a
quota throttles it, or the request memory pool (``queued.max.request.bytes``) is
spent; it reads again once every reason is gone. So a client that never reads its
responses, or sends a request a byte at a time, holds bounded memory and delays no
one else. Connections idle longer than ``connections.max.idle.ms`` are closed, and
``max.connections``/``max.connections.per.ip`` are counted at accept
(``connection_quotas.py``).

Garbage (negative or absurd sizes, an unknown API key or version, a body that does
not parse) closes that connection only; the broker and every other connection carry
on.

Each listener may bring a ``ListenerSecurity`` (``listener_security.py``): a TLS context
(the handshake runs in its own task, so a slow one holds up no other accept; fetched
file regions are copied through TLS, sendfile stays for plaintext), the principal of a
client certificate, and a SASL authenticator that sees every frame until the exchange
completes (no other request is served before, and frames are limited to Kafka's
``sasl.server.max.receive.size`` then). A session with a lifetime (KIP-368,
``security/reauth.py``) may re-authenticate with a new SaslHandshake; once expired, the
next other request closes the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..aio import AnswerFuture
from ..protocol.framing import FrameDecoder, FrameSizeError
from ..protocol.messages import ProtocolError
from ..security.authenticator import SASL_MAX_RECEIVE_SIZE
from ..security.principal import ANONYMOUS
from .connection_quotas import ConnectionQuotas, RequestMemoryPool
from .request_context import host_of

log = logging.getLogger(__name__)


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
# smaller file regions are copied: asyncio's sendfile (drain, pause reading, the send
# loop, resume) costs more than a pread for the few hundred bytes a follower or a
# consumer at the log end fetches; bulk reads keep going file to socket
SENDFILE_MIN_BYTES = 32 * 1024
# at most this many answers waiting for a future per connection; then reading waits too
MAX_PENDING_RESPONSES = 1000
Handler = Callable[["Connection", bytes], Awaitable[Response]]


class Security(Protocol):
    """What a listener asks of its connections (``listener_security.ListenerSecurity``)."""

    name: str
    ssl_context: Any

    @property
    def tls(self) -> bool: ...

    def authenticator(
        self, conn: Connection, api_versions: Handler, previous: Any = None
    ) -> Any: ...

    def ssl_principal(self, ssl_object: Any) -> Any: ...


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

    def __init__(
        self,
        server: SocketServer,
        ip: str = "?",
        listener: str = "PLAINTEXT",
        security: Security | None = None,
    ) -> None:
        self.server = server
        self.listener = listener  # the listener's name: metadata answers with its endpoints
        self.security = security
        self.principal = ANONYMOUS  # replaced by the user a SASL exchange authenticates
        self.authenticator = None  # a SASL listener's exchange, until it completes
        self.session = None  # a SASL session with a lifetime (KIP-368), once authenticated
        self.transport: asyncio.Transport | None = None
        self.ip = ip
        self.counted = ip != "?"  # holds a slot in the server's ConnectionQuotas
        self.peer = "?"
        self.client_host = host_of(self.peer)  # request_context.client_host of its requests
        self._decoder = FrameDecoder()  # its limits are set on each read: SASL or not
        self._frames: deque[tuple[bytes, int]] = deque()  # (frame, arrival perf_counter_ns)
        self._worker: _Eager | None = None
        self._outbox: deque = deque()  # responses held behind a future, in request order
        self._sender: _Eager | asyncio.Task | None = None  # sending the outbox
        self._waiting_on: asyncio.Future | None = None  # the held response a send waits on
        self._out: list | None = None  # responses written but not yet given to the transport
        self._closed = False
        self._mutes: set[str] = set()  # why reading is paused: queue, write, memory, throttle
        self._held = 0  # bytes of requests read and not yet answered (the memory pool's)
        self._handling = False
        self.last_active = time.monotonic()
        self._mute_s = 0.0  # a quota's throttle time: no reads for that long after the response
        self._can_write = asyncio.Event()
        self._can_write.set()
        # asyncio's own loops have loop.sendfile; uvloop does not, so bytes go through pread
        self.use_sendfile = (
            server.use_sendfile
            and isinstance(asyncio.get_event_loop(), asyncio.BaseEventLoop)
            and not (security is not None and security.tls)  # TLS encrypts in Python: copy
        )

    # -- asyncio.Protocol --------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = host_of(self.peer)
        self.server.connections.add(self)
        if self.security is not None:
            self._secure(transport)

    def _secure(self, transport: asyncio.BaseTransport) -> None:
        """TLS is up (asyncio calls connection_made after the handshake): take the client
        certificate's principal; on a SASL listener, start the exchange."""
        try:
            principal = self.security.ssl_principal(transport.get_extra_info("ssl_object"))
        except ValueError as exc:  # no ssl.principal.mapping.rules rule takes the DN
            log.warning("Failed authentication with %s (SSL): %s", self.peer, exc)
            self.abort(str(exc))
            return
        if principal is not None:
            self.principal = principal
        self.authenticator = self.security.authenticator(self, self.server.handler)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._can_write.set()
        self.server.connection_closed(self)
        pool = self.server.memory_pool
        pool.forget(self)
        held, self._held = self._held, 0
        pool.give_back(held)
        for task in (self._worker, self._sender):
            if task is not None and not task.done():
                task.cancel()
        self._drop_outbox()

    def pause_writing(self) -> None:
        """Responses pile up unread: read nothing more until the client catches up."""
        self._can_write.clear()
        self._mute("write")

    def resume_writing(self) -> None:
        self.last_active = time.monotonic()
        self._can_write.set()
        self._unmute("write")

    # -- muting: reading stops while any reason holds ------------------------------------
    def _mute(self, reason: str) -> None:
        if not self._mutes and not self._closed:
            self.transport.pause_reading()
        self._mutes.add(reason)

    def _unmute(self, reason: str) -> None:
        if reason not in self._mutes:
            return
        self._mutes.discard(reason)
        if not self._mutes and not self._closed:
            self.transport.resume_reading()

    @property
    def muted(self) -> frozenset[str]:
        return frozenset(self._mutes)

    def idle_since(self, now: float) -> float:
        """Seconds without a byte read, a write drained or a request being handled."""
        return 0.0 if self._handling else now - self.last_active

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        self._held += len(data)
        self.server.memory_pool.take(len(data))
        decoder = self._decoder
        if self.authenticator is not None:  # raw SASL tokens may be short; none may be large
            decoder.max_size = min(self.server.max_request_size, SASL_MAX_RECEIVE_SIZE)
            decoder.min_size, decoder.limit_name = 0, "sasl.server.max.receive.size"
        else:
            decoder.max_size = self.server.max_request_size
            decoder.min_size, decoder.limit_name = 8, "socket.request.max.bytes"
        arrived = time.perf_counter_ns()
        try:
            frames = decoder.feed(data)
        except FrameSizeError as exc:
            self.abort(str(exc))
            return
        self._frames.extend([(frame, arrived) for frame in frames])
        if self._frames and (self._worker is None or self._worker.done()):
            self._worker = _run_eagerly(self._work())
        if len(self._frames) >= self.server.queued_max_requests:
            self._mute("queue")
        pool = self.server.memory_pool
        # A request partly read goes on being read (so the pool cannot deadlock on
        # halves); a connection with none pending waits for memory to come back.
        if pool.exhausted() and not decoder.pending:
            self._mute("memory")
            pool.wait(self, lambda: self._unmute("memory"))

    # -- request processing ----------------------------------------------------------
    async def _work(self) -> None:
        frames = self._frames
        try:
            while frames and not self._closed:
                frame, arrived = frames.popleft()
                if len(frames) < self.server.queued_max_requests // 2:
                    self._unmute("queue")
                self._handling = True
                started = time.perf_counter_ns()
                auth = self.authenticator
                if auth is None and self.session is not None:
                    auth = self._check_session(frame)
                    if self._closed:
                        return
                raw = auth is not None and auth.raw_tokens  # a bare SASL token, no Kafka header
                try:
                    if auth is None:
                        response = await self.server.handler(self, frame)
                    else:
                        response = await auth.handle(self, frame)
                except ProtocolError as exc:
                    self.abort(str(exc))
                    return
                finally:
                    self._handling = False
                if auth is not None and (auth.complete or auth.failed):
                    self.authenticator = None
                    self.session = auth.session
                    if auth.failed:
                        await self._close_after(response, auth.failed)
                        return
                handled = time.perf_counter_ns()
                parked = self.server.take_parked_ns()  # read in the task the handler ran in
                if isinstance(response, asyncio.Future) or self._outbox:
                    await self._hold(response, (frame, arrived, started, handled, parked))
                else:
                    if response is not None:  # more requests already here: answer them first
                        await self.send(response, flush=not frames)
                    if not raw:
                        self.server.observe(
                            frame, arrived, started, handled, time.perf_counter_ns(), parked
                        )
                self.last_active = time.monotonic()
                self._release(4 + len(frame))
                if self._mute_s > 0:
                    await self._muted()
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug in a handler: drop this client, keep the broker
            log.exception("unexpected error serving %s; closing the connection", self.peer)
            self.abort("internal error")

    def _check_session(self, frame: bytes) -> Any:
        """KIP-368, before a request of an authenticated SASL session with a lifetime:
        a SaslHandshake starts a re-authentication (its authenticator is returned);
        any other request after the session expired closes the connection."""
        session, now = self.session, time.monotonic_ns()
        if session.starts_reauthentication(frame, now):
            session.reauth_started_ns = now
            self.authenticator = self.security.authenticator(self, self.server.handler, session)
            return self.authenticator
        if session.expired(now):
            session.stats.expired_connections_killed += 1
            self.abort(
                f"SASL session of {session.principal} expired {session.lifetime_ms} ms after "
                "authentication without re-authentication (connections.max.reauth.ms)"
            )
        return None

    def _drop_outbox(self) -> None:
        for item, _times in self._outbox:
            if isinstance(item, asyncio.Future):
                item.cancel()
        self._outbox.clear()

    async def _hold(self, response: Response | asyncio.Future, times: tuple) -> None:
        """Queue a response behind the ones still waiting; they leave in order.
        ``times`` is (frame, arrived, started, handled, parked) for the request metrics."""
        self._outbox.append((response, times))
        self._start_sending()
        while len(self._outbox) >= MAX_PENDING_RESPONSES and not self._closed:
            if self._sender is None or self._sender.done():  # back-pressure: finish these first
                self._sender = asyncio.ensure_future(self._send_in_order(wait=True))
            await asyncio.wait([self._sender])

    def _start_sending(self, _done: Any = None) -> None:
        """Send what the outbox holds, in order, unless a sender is at it already."""
        if self._sender is None or self._sender.done():
            self._sender = _run_eagerly(self._send_in_order())

    async def _send_in_order(self, wait: bool = False) -> None:
        """Send the outbox's responses in order until its first is a future not yet
        done; that future's completion starts the next round (a callback, not a task
        waiting on it), unless ``wait``: then until the outbox is empty."""
        outbox = self._outbox
        try:
            while outbox and not self._closed:
                response, (frame, arrived, started, handled, parked) = outbox[0]
                waited = 0
                if isinstance(response, asyncio.Future):
                    if not response.done() and wait:
                        await asyncio.wait([response])
                    if not response.done():
                        if self._waiting_on is not response:
                            self._waiting_on = response
                            if isinstance(response, AnswerFuture):  # sent as it completes
                                response.at_once.append(self._start_sending)
                            else:
                                response.add_done_callback(self._start_sending)
                        return
                    response = response.result()
                    waited = time.perf_counter_ns() - handled  # parked (Kafka's RemoteTime)
                outbox.popleft()
                if response is not None:
                    await self.send(response, flush=not _ready(outbox))
                self.server.observe(
                    frame, arrived, started, handled, time.perf_counter_ns(), parked, waited
                )
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
        self._mute("throttle")
        try:
            await asyncio.sleep(mute_s)
        finally:
            self._unmute("throttle")

    def _release(self, n: int) -> None:
        n = min(n, self._held)
        self._held -= n
        self.server.memory_pool.give_back(n)

    async def send(self, response: Response, flush: bool = True) -> None:
        """Write ``response``. With ``flush`` false it may wait, joined to the ones
        written after it, until a flush or the loop's next turn: the acks=all responses
        one replica fetch completes, or the answers to requests read together, leave
        in one send (one wake-up of the client) instead of one each."""
        if self._closed:
            return
        if not self._can_write.is_set():
            await self._can_write.wait()
        if isinstance(response, bytes | bytearray):
            self._write(response, flush)
            return
        pending: list[bytes] = []  # written as one buffer: one send, not one per part
        for part in response:
            if not isinstance(part, FileRegion):
                pending.append(part)
            elif self.use_sendfile and part.count >= SENDFILE_MIN_BYTES:
                self._write(b"".join(pending), True)
                pending = []
                loop = asyncio.get_running_loop()
                await loop.sendfile(self.transport, _FdFile(part.fd), part.position, part.count)
                if self._closed:
                    return
            elif part.count:
                pending.append(os.pread(part.fd, part.count, part.position))
        if not self._closed:
            self._write(b"".join(pending), flush)

    def _write(self, data: bytes, flush: bool) -> None:
        out = self._out
        if out is None:
            if flush:
                if data:
                    self.transport.write(data)
                return
            self._out = [data]
            asyncio.get_running_loop().call_soon(self._flush)  # never later than this
            return
        out.append(data)
        if flush:
            self._flush()

    def _flush(self) -> None:
        out, self._out = self._out, None
        if out and not self._closed:
            self.transport.write(b"".join(out))

    async def _close_after(self, response: Response, reason: str) -> None:
        """Send the last response (when there is one), then close (SASL failures) after
        ``connection.failed.authentication.delay.ms``, reading nothing meanwhile (KIP-306:
        a password guesser gets one try per delay per connection)."""
        if response is not None:
            await self.send(response)
        delay_s = self.server.failed_authentication_delay_ms / 1000.0
        if delay_s > 0 and not self._closed and self.transport is not None:
            self.transport.pause_reading()
            self._frames.clear()
            await asyncio.sleep(delay_s)
        if not self._closed:
            log.info("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._frames.clear()
            self._drop_outbox()
            self.transport.close()  # flushes what was written, unlike abort

    def abort(self, reason: str) -> None:
        if not self._closed:
            log.warning("closing connection from %s: %s", self.peer, reason)
            self._closed = True
            self._frames.clear()
            self._drop_outbox()
            if self.transport is not None:
                self.transport.abort()


def _run_eagerly(coro: Any) -> _Eager | None:
    """Run ``coro`` at once, in this callback, up to its first wait: the requests that
    complete at once (most) are served without a Task or a turn of the loop; one that
    must wait goes on in an ``_Eager`` (None if done)."""
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return _Eager(coro, first)


class _Eager:
    """A coroutine run up to its first wait, then resumed from the done-callback of each
    future it waits on: what a Task does, less the Task's first step. A Task taking over
    a started coroutine spends a turn of the loop only to wait on the future the
    coroutine already waits on; a follower's fetch parks at the leader on every acks=all
    record, so that turn came with every record (issue 24). The coroutine runs in the
    context of the callback that resumes it (asyncio copies it when the callback is
    added, as a Task's steps do); ``cancel`` throws CancelledError into it at its wait,
    as ``Task.cancel``. Only the network layer's two request coroutines run in one: they
    never ask for ``asyncio.current_task()``."""

    __slots__ = ("_coro", "_waiting", "_cancelling", "_done", "_finished")

    def __init__(self, coro: Any, first: Any) -> None:
        self._coro = coro
        self._waiting: asyncio.Future | None = None
        self._cancelling = False
        self._done = False
        self._finished: asyncio.Future | None = None  # made for whoever awaits this
        self._wait_on(first)

    def done(self) -> bool:
        return self._done

    def cancel(self) -> bool:
        if self._done:
            return False
        self._cancelling = True
        waiting = self._waiting
        if waiting is not None:
            waiting.cancel()  # its done-callback throws CancelledError in
        return True

    def __await__(self):
        if self._finished is None:
            self._finished = asyncio.get_running_loop().create_future()
            if self._done:
                self._finished.set_result(None)
        return self._finished.__await__()

    def _wait_on(self, yielded: Any) -> None:
        if yielded is None:  # a bare yield (asyncio.sleep(0)): on at the next turn
            self._waiting = None
            asyncio.get_running_loop().call_soon(self._resume, None)
            return
        yielded._asyncio_future_blocking = False  # taken, as a Task takes it
        self._waiting = yielded
        yielded.add_done_callback(self._resume)

    def _resume(self, fut: asyncio.Future | None) -> None:
        self._waiting = None
        coro = self._coro
        try:
            if self._cancelling or (fut is not None and fut.cancelled()):
                self._cancelling = False
                yielded = coro.throw(asyncio.CancelledError())
            elif fut is not None and (exc := fut.exception()) is not None:
                yielded = coro.throw(exc)
            else:
                yielded = coro.send(None if fut is None else fut.result())
        except StopIteration:
            self._end()
        except asyncio.CancelledError:
            self._end()
        except BaseException:
            self._end()
            raise  # the loop's exception handler logs it, as for any callback
        else:
            self._wait_on(yielded)

    def _end(self) -> None:
        self._done = True
        if self._finished is not None and not self._finished.done():
            self._finished.set_result(None)


def _ready(outbox: deque) -> bool:
    """Whether the next held response can be written at once."""
    if not outbox:
        return False
    response = outbox[0][0]
    return not isinstance(response, asyncio.Future) or response.done()


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bound and listening: an empty host is every address (IPv4 and IPv6 where the
    machine has both), a name or address binds its first resolved address."""
    if not host and socket.has_dualstack_ipv6():
        return socket.create_server(
            ("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=1024
        )
    family, _, _, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    return socket.create_server(address[:2], family=family, backlog=1024)


class SocketServer:
    """Listens on addresses, counts connections against their quotas and hands each
    frame to ``handler``."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_request_size: int,
        queued_max_requests: int = 500,
        send_buffer: int = -1,
        receive_buffer: int = -1,
        quotas: ConnectionQuotas | None = None,
        memory_pool: RequestMemoryPool | None = None,
        max_idle_ms: int = 600_000,
        failed_authentication_delay_ms: int = 100,
    ) -> None:
        self.handler = handler
        self.max_request_size = max_request_size
        self.queued_max_requests = queued_max_requests
        self.send_buffer = send_buffer
        self.receive_buffer = receive_buffer
        self.quotas = quotas or ConnectionQuotas()
        self.memory_pool = memory_pool or RequestMemoryPool()
        self.max_idle_ms = max_idle_ms
        self.failed_authentication_delay_ms = failed_authentication_delay_ms
        self.connections: set[Connection] = set()
        self.use_sendfile = hasattr(os, "sendfile")
        self._listeners: list[socket.socket] = []
        self._tasks: list[asyncio.Task] = []
        self._handshakes: set[asyncio.Task] = set()

    def observe(
        self,
        frame: bytes,
        arrived: int,
        started: int,
        handled: int,
        sent: int,
        parked_ns: int = 0,
        waited_ns: int = 0,
    ) -> None:
        """Called once per request with its times (perf_counter_ns): ``parked_ns`` spent
        parked inside the handler (a long-poll fetch), ``waited_ns`` on the future it
        answered with (an acks=all produce). The metrics replace it (``broker.metrics``),
        otherwise it does nothing."""

    def take_parked_ns(self) -> int:
        """Time the request just handled spent parked inside its handler, read (and
        reset) in the handler's own task; the metrics replace it."""
        return 0

    async def listen(
        self, host: str, port: int, listener: str = "PLAINTEXT", security: Security | None = None
    ) -> int:
        sock = _listening_socket(host, port)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.send_buffer > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        if self.receive_buffer > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
        self._listeners.append(sock)
        self._tasks.append(asyncio.ensure_future(self._accept_loop(sock, listener, security)))
        if len(self._tasks) == 1 and self.max_idle_ms >= 0:
            self._tasks.append(asyncio.ensure_future(self._close_idle()))
        return sock.getsockname()[1]

    async def _accept_loop(
        self, sock: socket.socket, listener: str, security: Security | None
    ) -> None:
        """Kafka's Acceptor: wait for a slot under max.connections, accept, count."""
        loop = asyncio.get_running_loop()
        while True:
            await self.quotas.wait_for_slot()
            try:
                client, addr = await loop.sock_accept(sock)
            except OSError as exc:  # EMFILE and friends: keep the listener, try again soon
                log.warning("accepting a connection failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            ip = addr[0].removeprefix("::ffff:")  # IPv4 on a dual-stack socket
            delay_ms = self.quotas.creation.record(listener, time.monotonic() * 1000)
            if delay_ms > 0:  # KIP-612: over a connection creation rate, the acceptor waits
                await asyncio.sleep(delay_ms / 1000)
            refused = self.quotas.admit(ip)
            if refused is not None:
                log.info("rejected connection from %s: %s", ip, refused)
                client.close()
                continue
            setup = self._set_up(client, ip, listener, security)
            if security is not None and security.tls:  # the TLS handshake: in its own task
                task = asyncio.ensure_future(setup)
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
            else:
                await setup

    async def _set_up(
        self, client: socket.socket, ip: str, listener: str, security: Security | None
    ) -> None:
        loop = asyncio.get_running_loop()
        tls = security.ssl_context if security is not None else None
        try:
            await loop.connect_accepted_socket(
                lambda: Connection(self, ip, listener, security),
                client,
                ssl=tls,
                ssl_handshake_timeout=10.0 if tls is not None else None,
            )
        except (OSError, ssl.SSLError) as exc:  # a failed TLS handshake lands here too
            log.info("connection from %s lost while being set up: %s", ip, exc)
            self.quotas.release(ip)
            client.close()

    def connection_closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
        if conn.counted:
            conn.counted = False
            self.quotas.release(conn.ip)

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: close connections with nothing read, written or
        being handled for that long (Kafka's Selector does the same each poll)."""
        idle_s = self.max_idle_ms / 1000.0
        period = max(0.05, min(idle_s / 4, 10.0))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in [c for c in self.connections if c.idle_since(now) > idle_s]:
                conn.abort(f"idle for more than connections.max.idle.ms={self.max_idle_ms}")

    async def close(self) -> None:
        for task in [*self._tasks, *self._handshakes]:
            task.cancel()
        for sock in self._listeners:
            sock.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        await asyncio.gather(*self._tasks, return_exceptions=True)
