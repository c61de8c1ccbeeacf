"""Request/response codecs on kio: sans-IO, bytes in and bytes out.

kio generates one frozen dataclass per API message *and version*. Handlers describe
a response once as plain dicts; ``build(cls, data)`` shapes that into the exact
version the client asked for, dropping fields the version lacks and taking defaults
for the ones the handler did not set, so one handler serves every version.
"""

from __future__ import annotations

import datetime
import io
import struct
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from .bounds import check_body
from .schemas import EXTRA_SCHEMAS

_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)
_HEAD = struct.Struct(">hhi")


class ProtocolError(Exception):
    """A frame we cannot parse: the connection is closed, as Kafka does."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api key, api version and correlation id: the first 8 bytes of every request."""
    if len(frame) < 8:
        raise ProtocolError(f"request of {len(frame)} bytes is shorter than a header")
    return _HEAD.unpack_from(frame, 0)


@cache
def request_schema(api_key: int, version: int) -> type:
    extra = EXTRA_SCHEMAS.get((api_key, version))
    return extra[0] if extra else load_request_schema(api_key, version)


@cache
def response_schema(api_key: int, version: int) -> type:
    extra = EXTRA_SCHEMAS.get((api_key, version))
    return extra[1] if extra else load_response_schema(api_key, version)


@cache
def _reader(cls: type):
    return entity_reader(cls)


@cache
def _writer(cls: type):
    return entity_writer(cls)


def parse_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """Decode header and body; raises ProtocolError on malformed bytes."""
    api_key, version, _ = peek_header(frame)
    schema = request_schema(api_key, version)
    header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    try:
        header, used = _reader(header_cls)(frame, 0)
        check_body(schema, frame, used)  # kio allocates from counts before reading
        body, body_len = _reader(schema)(frame, used)
    except Exception as exc:  # kio raises several types for short or bad input
        raise ProtocolError(f"malformed {schema.__name__} v{version}: {exc}") from None
    # Bytes after the body are ignored, as Kafka's own request parser does: librdkafka,
    # for one, sends Metadata v12 with fields of older versions behind the body.
    return RequestHeader(api_key, version, header.correlation_id, header.client_id), body


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """Size-prefixed response frame. ApiVersions always uses response header v0."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(struct.pack(">i", correlation_id))
    if type(body).__flexible__ and api_key != 18:
        out.write(b"\0")  # response header v1: empty tagged fields
    _writer(type(body))(out, body)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """Size-prefixed request frame (used by our CLI, tests and inter-broker client)."""
    schema = type(body)
    header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    _writer(header_cls)(
        out,
        header_cls(
            request_api_key=header.api_key,
            request_api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
        ),
    )
    _writer(schema)(out, body)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def parse_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (without its size prefix): correlation id and body;
    raises ProtocolError on malformed bytes."""
    schema = response_schema(api_key, version)
    try:
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        pos = 4
        if schema.__flexible__ and api_key != 18:
            pos += 1  # assumes no tagged fields in the response header, as Kafka sends
        check_body(schema, frame, pos)  # a peer's counts are checked as a client's are
        body, _ = _reader(schema)(frame, pos)
    except Exception as exc:  # short frames, bad counts, unknown error codes
        raise ProtocolError(f"malformed {schema.__name__} v{version}: {exc}") from None
    return correlation_id, body


# -- building versioned entities from plain data ----------------------------------


class _FieldInfo(NamedTuple):
    name: str
    kafka_type: str | None
    nested: type | None
    is_array: bool
    default: Any


@cache
def _field_infos(cls: type) -> tuple[_FieldInfo, ...]:
    infos = []
    for f in fields(cls):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        infos.append(
            _FieldInfo(f.name, f.metadata.get("kafka_type"), nested, kind.is_array, default)
        )
    return tuple(infos)


_ZERO_DEFAULTS = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": _EPOCH,
    "uuid": None,
}


def _convert(kafka_type: str | None, value: Any) -> Any:
    if value is None:
        return None
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return _EPOCH + datetime.timedelta(milliseconds=value)
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type == "uuid" and isinstance(value, bytes | bytearray):
        return uuid.UUID(bytes=bytes(value))
    return value


def build(cls: type, data: dict[str, Any]) -> Any:
    """Construct kio entity ``cls`` from a dict, recursively; unknown keys are ignored."""
    kwargs = {}
    for info in _field_infos(cls):
        if info.name in data:
            value = data[info.name]
            if info.nested is not None:
                if info.is_array:
                    value = (
                        None
                        if value is None
                        else tuple(v if is_dataclass(v) else build(info.nested, v) for v in value)
                    )
                elif value is not None and not is_dataclass(value):
                    value = build(info.nested, value)
            elif info.is_array:
                value = (
                    None if value is None else tuple(_convert(info.kafka_type, v) for v in value)
                )
            else:
                value = _convert(info.kafka_type, value)
            kwargs[info.name] = value
        elif info.default is MISSING:
            kwargs[info.name] = () if info.is_array else _ZERO_DEFAULTS.get(info.kafka_type)
    return cls(**kwargs)


def ms(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """A kio timedelta/datetime (or int) as integer milliseconds."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):  # every Produce and Fetch: no new timedelta
        return int(value / _ONE_MS)
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH) / _ONE_MS)
    return int(value)


_ONE_MS = datetime.timedelta(milliseconds=1)
