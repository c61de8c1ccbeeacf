"""Bounds check of a message body before kio decodes it: every count fits the bytes.

kio's native readers allocate an array from its count before reading an element, so a
20-byte Metadata request declaring 2**31 topics asks for 16 GiB and aborts the process
(a Rust allocation failure is not an exception). Kafka's own parser refuses a count
larger than the bytes that remain in the frame; ``check_body`` does the same walk over
the schema first, reading only lengths and counts: arrays, strings, bytes and records,
and the tagged fields of flexible versions (each walked inside its own declared size).
It raises ``BoundsError`` with a sentence naming the field; the caller closes the
connection as for any malformed frame.

Every array element takes at least one byte on the wire, so a count within the
remaining bytes bounds what kio allocates to a small multiple of the frame size.
"""

from __future__ import annotations

import struct
from dataclasses import fields
from functools import cache

from kio.serial._introspect import EntityField, EntityTupleField, classify_field

__all__ = ["BoundsError", "check_body"]

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class BoundsError(ValueError):
    """A count or length in a frame runs past the bytes that follow it."""


def _uvarint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise BoundsError("a varint runs past the end of the frame")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise BoundsError("a varint is longer than 5 bytes")


def _length(buf, pos: int, end: int, compact: bool, wide: bool, what: str) -> tuple[int, int]:
    """(length or -1 for null, position after it), checked against the bytes left."""
    if compact:
        raw, pos = _uvarint(buf, pos, end)
        length = raw - 1
    else:
        size = 4 if wide else 2
        if end - pos < size:
            raise BoundsError(f"the length of {what} runs past the end of the frame")
        length = (_I32 if wide else _I16).unpack_from(buf, pos)[0]
        pos += size
    if length < -1:
        raise BoundsError(f"{what} declares a negative length {length}")
    if length > end - pos:
        raise BoundsError(f"{what} declares {length} but only {end - pos} bytes follow")
    return length, pos


def _skip_primitive(kafka_type: str, flexible: bool, what: str):
    fixed = _FIXED.get(kafka_type)
    if fixed is not None:

        def skip_fixed(buf, pos, end):
            if end - pos < fixed:
                raise BoundsError(f"{what} runs past the end of the frame")
            return pos + fixed

        return skip_fixed
    wide = kafka_type != "string"

    def skip_sized(buf, pos, end):
        length, pos = _length(buf, pos, end, flexible, wide, what)
        return pos + max(length, 0)

    return skip_sized


def _array(item, flexible: bool, what: str):
    def skip_array(buf, pos, end):
        count, pos = _length(buf, pos, end, flexible, True, f"the array {what}")
        for _ in range(count):
            pos = item(buf, pos, end)
        return pos

    return skip_array


@cache
def _walker(cls: type):
    """A function (buf, pos, end) -> pos past one ``cls`` entity, checking every count."""
    flexible = cls.__flexible__
    steps = []
    tagged = {}
    for f in fields(cls):
        kind = classify_field(f)
        what = f"{cls.__name__}.{f.name}"
        if isinstance(kind, EntityField | EntityTupleField):
            step = _entity_step(kind.type_)
        else:
            step = _skip_primitive(f.metadata["kafka_type"], flexible, what)
        if kind.is_array:
            step = _array(step, flexible, what)
        if "tag" in f.metadata:
            tagged[f.metadata["tag"]] = step
        else:
            steps.append(step)

    def walk(buf, pos, end):
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            pos = _tagged_fields(buf, pos, end, tagged, cls.__name__)
        return pos

    return walk


def _entity_step(cls: type):
    def step(buf, pos, end):  # late binding: schemas may nest a type more than once
        return _walker(cls)(buf, pos, end)

    return step


def _tagged_fields(buf, pos: int, end: int, tagged: dict, name: str) -> int:
    count, pos = _uvarint(buf, pos, end)
    if count > end - pos:
        raise BoundsError(f"{name} declares {count} tagged fields with {end - pos} bytes left")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise BoundsError(f"tagged field {tag} of {name} declares {size} bytes")
        step = tagged.get(tag)
        if step is not None:
            step(buf, pos, pos + size)
        pos += size
    return pos


def check_body(cls: type, buf, pos: int) -> None:
    """Raise ``BoundsError`` if any count or length in the ``cls`` body at ``pos`` of
    ``buf`` exceeds the bytes after it. Bytes after the body are allowed."""
    _walker(cls)(buf, pos, len(buf))
