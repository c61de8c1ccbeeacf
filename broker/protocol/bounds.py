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
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import NamedTuple

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

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


def _length(
    buf, pos: int, end: int, compact: bool, wide: bool, what: str, nullable: bool = True
) -> tuple[int, int]:
    """(length or -1 for null, position after it), checked against the bytes left."""
    if compact:
        if pos < end and buf[pos] < 0x80:  # one-byte varint: most lengths and counts
            length = buf[pos] - 1
            pos += 1
        else:
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
    if length == -1 and not nullable:  # Kafka's parsers refuse it the same way
        raise BoundsError(f"non-nullable field {what} was serialized as null")
    if length > end - pos:
        raise BoundsError(f"{what} declares {length} but only {end - pos} bytes follow")
    return length, pos


def _skip(size: int, what: str):
    def skip_fixed(buf, pos, end):
        if end - pos < size:
            raise BoundsError(f"{what} runs past the end of the frame")
        return pos + size

    return skip_fixed


def _skip_sized(kafka_type: str, flexible: bool, what: str, nullable: bool):
    wide = kafka_type != "string"

    def skip_sized(buf, pos, end):
        length, pos = _length(buf, pos, end, flexible, wide, what, nullable)
        return pos + max(length, 0)

    return skip_sized


def _array(item: _Compiled, flexible: bool, what: str, nullable: bool):
    """Skip an array: one multiplication when its items have a fixed size, a tight
    loop when they are fixed-size fields and a tagged-field section (flexible)."""
    label = f"the array {what}"
    size, flex = item.size, item.flexible_fixed
    if size is not None:

        def skip_fixed_items(buf, pos, end):
            count, pos = _length(buf, pos, end, flexible, True, label, nullable)
            pos += max(count, 0) * size
            if pos > end:
                raise BoundsError(f"the {count} items of {what} run past the end of the frame")
            return pos

        return skip_fixed_items
    if flex is not None:
        flex_size, tagged, name = flex

        def skip_flexible_items(buf, pos, end):
            count, pos = _length(buf, pos, end, flexible, True, label, nullable)
            for _ in range(count):
                pos += flex_size
                if pos >= end:
                    raise BoundsError(f"the items of {what} run past the end of the frame")
                if buf[pos] == 0:
                    pos += 1
                else:
                    pos = _tagged_fields(buf, pos, end, tagged, name)
            return pos

        return skip_flexible_items
    walk = item.walk

    def skip_array(buf, pos, end):
        count, pos = _length(buf, pos, end, flexible, True, label, nullable)
        for _ in range(count):
            pos = walk(buf, pos, end)
        return pos

    return skip_array


class _Compiled(NamedTuple):
    walk: Callable  # (buf, pos, end) -> pos past one entity, every count checked
    size: int | None = None  # bytes of every such entity, when fixed (no strings, arrays, tags)
    # (bytes, known tags, name) of a flexible entity of fixed-size fields and tagged fields
    flexible_fixed: tuple[int, dict, str] | None = None


@cache
def _compile(cls: type) -> _Compiled:
    """Steps over ``cls``'s fields in wire order; runs of fixed-size fields are one step."""
    flexible = cls.__flexible__
    steps: list[Callable] = []
    tagged: dict[int, Callable] = {}
    run = 0  # bytes of fixed-size fields not yet turned into a step
    variable = False  # a string, bytes, array or nested variable entity among the fields
    for f in fields(cls):
        kind = classify_field(f)
        what = f"{cls.__name__}.{f.name}"
        nullable = is_optional(f)
        if isinstance(kind, EntityField | EntityTupleField):
            item = _compile(kind.type_)
        else:
            kafka_type = f.metadata["kafka_type"]
            size = _FIXED.get(kafka_type)
            item = _Compiled(
                _skip(size, what) if size else _skip_sized(kafka_type, flexible, what, nullable),
                size,
            )
        if kind.is_array:
            item = _Compiled(_array(item, flexible, what, nullable))
        if "tag" in f.metadata:
            tagged[f.metadata["tag"]] = item.walk
            continue
        if item.size is not None:
            run += item.size
            continue
        variable = True
        if run:
            steps.append(_skip(run, cls.__name__))
            run = 0
        steps.append(item.walk)
    if not variable and not flexible:
        return _Compiled(_skip(run, cls.__name__), run)
    name = cls.__name__
    flexible_fixed = (run, tagged, name) if not variable else None
    if run:
        steps.append(_skip(run, name))

    def walk(buf, pos, end):
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            if pos < end and buf[pos] == 0:  # no tagged fields: the usual case
                return pos + 1
            pos = _tagged_fields(buf, pos, end, tagged, name)
        return pos

    return _Compiled(walk, None, flexible_fixed)


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
    _compile(cls).walk(buf, pos, len(buf))
