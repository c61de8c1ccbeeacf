"""broker.protocol.framing: frames split anywhere come back whole; a bad size is refused."""

import pytest

from broker.protocol.framing import FrameDecoder, FrameSizeError, encode_frame


def test_frames_split_at_every_byte_come_back_whole():
    payloads = [b"", b"a" * 5, bytes(range(256)) * 3]
    wire = b"".join(encode_frame(p) for p in payloads)
    for step in (1, 3, 7, len(wire)):
        decoder, got = FrameDecoder(), []
        for i in range(0, len(wire), step):
            got += decoder.feed(wire[i : i + step])
        assert got == payloads
        assert decoder.pending == 0


def test_size_outside_the_limits_is_refused_with_the_key():
    decoder = FrameDecoder(max_size=10, limit_name="socket.request.max.bytes")
    with pytest.raises(FrameSizeError, match=r"11 is outside \[0, socket.request.max.bytes=10\]"):
        decoder.feed(encode_frame(b"x" * 11))
    with pytest.raises(FrameSizeError, match="-1"):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
    with pytest.raises(FrameSizeError, match="3 is outside"):
        FrameDecoder(min_size=4).feed(encode_frame(b"abc"))


def test_pull_reads_no_byte_past_the_frame():
    wire = bytearray(encode_frame(b"first") + encode_frame(b"second"))
    asked = []

    def recv(n):
        asked.append(n)
        chunk = wire[:n]
        del wire[:n]
        return bytes(chunk)

    assert FrameDecoder().pull(recv) == b"first"
    assert bytes(wire) == encode_frame(b"second")  # left on the socket for the next reader
    assert FrameDecoder().pull(recv) == b"second"
    with pytest.raises(EOFError):
        FrameDecoder().pull(recv)
