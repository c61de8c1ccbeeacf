"""Kafka's size-prefixed frames: a signed 32-bit big-endian length, then that many bytes.

Every request and response travels so. ``encode_frame`` puts the prefix on a payload;
a ``FrameDecoder`` takes bytes as they arrive (any split) and gives back the complete
frames, without the prefix, keeping the rest for the next call. It refuses a size
outside ``[min_size, max_size]`` with ``FrameSizeError`` (a sentence naming the limit),
as Kafka's NetworkReceive does before it allocates anything: the caller closes the
connection. Pure: no sockets here. ``pull`` serves blocking and pull-style readers: it
asks a ``recv(n)`` callable for exactly the bytes the next frame still needs, so no
byte of a later answer is read ahead (a socket can be handed on between readers).

The broker's request loop (broker.server.network), the broker's own client
(broker.client.connection) and the blocking sockets (cluster_client.client_socket, the
console's wire) share it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

__all__ = ["SIZE", "UNLIMITED", "FrameDecoder", "FrameSizeError", "encode_frame"]

SIZE = struct.Struct(">i")
PREFIX = SIZE.size
UNLIMITED = (1 << 31) - 1  # clients, like Kafka's, take a response of any size
_PULL_CHUNK = 1 << 20


class FrameSizeError(ValueError):
    """A frame's declared size is outside what the reader accepts."""


def encode_frame(payload: bytes | bytearray) -> bytes:
    """``payload`` with its size in front."""
    return SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Incremental, bounded: ``feed(data)`` returns the frames ``data`` completes.

    ``max_size``, ``min_size`` and ``limit_name`` (the config key named in the refusal)
    may be changed between calls: a SASL exchange reads under a smaller limit."""

    __slots__ = ("buffer", "limit_name", "max_size", "min_size")

    def __init__(
        self, max_size: int = UNLIMITED, min_size: int = 0, limit_name: str = "max size"
    ) -> None:
        self.buffer = bytearray()  # bytes of a frame not yet complete
        self.max_size = max_size
        self.min_size = min_size
        self.limit_name = limit_name

    @property
    def pending(self) -> int:
        """Bytes held of a frame not yet complete."""
        return len(self.buffer)

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        buf = self.buffer
        buf += data
        end = len(buf)
        if end < PREFIX:
            return []
        frames = []
        pos = 0
        max_size, min_size = self.max_size, self.min_size
        with memoryview(buf) as view:  # one copy per frame: out of the buffer
            while end - pos >= PREFIX:
                (size,) = SIZE.unpack_from(buf, pos)
                if size < min_size or size > max_size:
                    raise FrameSizeError(
                        f"frame size {size} is outside [{min_size}, {self.limit_name}={max_size}]"
                    )
                start = pos + PREFIX
                if end - start < size:
                    break
                frames.append(bytes(view[start : start + size]))
                pos = start + size
        if pos:
            del buf[:pos]
        return frames

    def needed(self) -> int:
        """Bytes still to read to complete the next frame (its prefix first)."""
        have = len(self.buffer)
        if have < PREFIX:
            return PREFIX - have
        (size,) = SIZE.unpack_from(self.buffer, 0)
        return max(PREFIX + size - have, 1)

    def pull(self, recv: Callable[[int], bytes]) -> bytes:
        """The next frame, read through ``recv(n)`` (a blocking socket's ``recv``) no
        further than its end; ``EOFError`` when ``recv`` returns nothing."""
        while True:
            data = recv(min(self.needed(), _PULL_CHUNK))
            if not data:
                raise EOFError("the peer closed the connection")
            frames = self.feed(data)
            if frames:
                return frames[0]  # never more than one: nothing is read past its end
