"""Record ids of the exactly-once sink: what lets a retried task tell which of its rows
an earlier attempt already wrote.

A row's id is `<task prefix><digest>[/<occurrence>]`:

- the task prefix, `<query id>/<batch id>/<Spark partition id>/`, names the task;
- the digest is 64 bits (16 hex digits) of what the row writes: value, key, and, when
  the DataFrame has them, the topic, partition and headers columns;
- the occurrence numbers rows with the same digest within the task (0 is left out),
  so identical rows get distinct ids.

Spark recomputes a task partition with the same multiset of rows, but after a shuffle
not necessarily in the same order. The ids of a task are a function of that multiset
alone: the digest depends only on the row, and which of k identical rows gets which
occurrence number does not matter, they write the same record.

The digests are SipHash-2-4 (pandas.util.hash_array, a fixed key per column, the same
in every process and release of pandas 2) computed a column at a time in C, then
folded per row with numpy: the per-row Python work is one list item, not a hash call
(hashlib.blake2b costs ~0.5 us a row here, the column hashes ~0.1 us). A collision of
two different rows of one task (probability ~n^2 / 2^65 for n rows: 3e-8 at a million)
only matters if the two also change order between attempts and an attempt dies
between them.
"""

from __future__ import annotations

import numpy as np

# A 16-byte SipHash key per column, so a key and a value that swap places differ.
_HASH_KEYS = {
    "value": "quill.eos.value.",
    "key": "quill.eos.key...",
    "topic": "quill.eos.topic.",
    "partition": "quill.eos.part..",
    "headers": "quill.eos.header",
}
_NULL = np.uint64(0x6E756C6C6E756C6C)  # a null column value ("nullnull")
_FOLD = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplying is a bijection
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _hash(values: np.ndarray, nulls, name: str) -> np.ndarray:
    """SipHash of each item of an object array (bytes or str, str as UTF-8), or the
    numeric hash of an int array; null items get one constant."""
    from pandas.util import hash_array

    h = hash_array(values, hash_key=_HASH_KEYS[name], categorize=False)
    if nulls is not None:
        h[nulls] = _NULL
    return h


def headers_bytes(headers) -> bytes:
    """One row's headers as unambiguous bytes (a length before each part)."""
    out = bytearray()
    for key, value in headers:
        name = key.encode()
        out += len(name).to_bytes(4, "big") + name
        out += b"\xff\xff\xff\xff" if value is None else len(value).to_bytes(4, "big") + value
    return bytes(out)


def digests(columns: dict) -> np.ndarray:
    """The 64-bit digest of each row, from `SinkColumns.for_hashing()`: {column name:
    (array, null mask or None)} with at least "value"."""
    values, nulls = columns["value"]
    h = _hash(values, nulls, "value")
    for name in ("key", "topic", "partition", "headers"):
        if name in columns:
            h = h * _FOLD ^ _hash(*columns[name], name)
    return h


class RecordIds:
    """The ids of one task's rows, batch after batch."""

    def __init__(self, prefix: str):
        self.prefix = prefix.encode()
        self._head = np.frombuffer(self.prefix, dtype=np.uint8)
        self.seen: set[int] = set()  # digests of the task's rows so far
        self.repeats: dict[int, int] = {}  # digest -> rows with it so far, when > 1

    def for_batch(self, columns: dict) -> list[bytes]:
        """The ids of the next rows, in row order (`columns` as `digests` takes them)."""
        h = digests(columns)
        ids = self._format(h)
        numbers = self._occurrences(h)
        if numbers is not None:
            for row in np.flatnonzero(numbers).tolist():
                ids[row] = b"%b/%d" % (ids[row], numbers[row])
        return ids

    def _format(self, h: np.ndarray) -> list[bytes]:
        """prefix + 16 hex digits per digest, built as one byte matrix."""
        n, width = len(h), len(self.prefix)
        nibbles = h.astype(">u8").view(np.uint8).reshape(n, 8)
        out = np.empty((n, width + 16), dtype=np.uint8)
        out[:, :width] = self._head
        out[:, width::2] = _HEX[nibbles >> 4]
        out[:, width + 1 :: 2] = _HEX[nibbles & 15]
        return out.view(f"S{width + 16}").ravel().tolist()

    def _occurrences(self, h: np.ndarray) -> np.ndarray | None:
        """Each row's occurrence number, or None when every digest is new: the common
        case, told by set operations in C. Otherwise rows are ranked within their
        digest with numpy, and Python works once per distinct digest."""
        digests, seen = h.tolist(), self.seen
        if seen.isdisjoint(digests):
            before = len(seen)
            seen.update(digests)
            if len(seen) - before == len(digests):
                return None
            seen.difference_update(digests)
        order = np.argsort(h, kind="stable")  # identical rows keep their order
        ranked = h[order]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
        sizes = np.diff(np.r_[starts, len(h)])
        earlier = []  # rows with each distinct digest in earlier batches
        for d, size in zip(ranked[starts].tolist(), sizes.tolist(), strict=True):
            count = self.repeats.get(d, 1) if d in seen else 0
            earlier.append(count)
            seen.add(d)
            if count + size > 1:
                self.repeats[d] = count + size
        numbers = np.empty(len(h), dtype=np.int64)
        numbers[order] = np.arange(len(h)) - np.repeat(starts - earlier, sizes)
        return numbers
