"""Compiling schemas and decoding payloads, bounded: Avro with fastavro, Protobuf with
Debian's protoc (a .proto text to a FileDescriptorSet, in a subprocess with a timeout)
and the protobuf package's descriptor pool and message factory.

Everything here raises SchemaError with a sentence for the operator; nothing else
escapes (a hostile schema or payload must never become a 500)."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import io
import json
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from dataclasses import dataclass

import fastavro
from fastavro import _read_py
from fastavro.schema import SchemaParseException, UnknownType
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from console.schemas import avro_shape

MAX_SCHEMA_CHARS = 256 * 1024  # a schema's text (uploaded, or from the registry)
MAX_PAYLOAD_BYTES = 1024 * 1024  # a key or value decoded; larger ones are shown raw
MAX_DEPTH = 64  # nesting of a decoded value
PROTOC_TIMEOUT_S = 10
PROTO_FILE = "schema.proto"
# the well-known types (google/protobuf/timestamp.proto, ...) that Debian installs: the
# only files an uploaded .proto may import (protoc maps the virtual path to the directory)
WELL_KNOWN_PREFIX = "google/protobuf"
WELL_KNOWN_INCLUDE = "/usr/include/google/protobuf"

KINDS = ("avro", "protobuf")

_runs_lock = threading.Lock()
_protoc_runs = 0  # protoc processes started by this process (tests count compiles with it)


def protoc_runs() -> int:
    return _protoc_runs


class SchemaError(Exception):
    """A schema that does not compile or a payload that does not decode; str() says why."""


@dataclass(frozen=True)
class Compiled:
    """A schema ready to decode with. Avro: ``avro`` is fastavro's parsed schema.
    Protobuf: ``messages`` is every message type's full name in declaration order,
    nested ones under their parent (the Confluent message indexes walk it)."""

    kind: str
    avro: object = None
    # a recursive Avro schema: decoded by fastavro's pure-Python reader, whose depth
    # Python bounds (a RecursionError); the compiled one has no check and segfaults
    avro_recursive: bool = False
    pool: object = None
    file: object = None  # FileDescriptorProto of the schema's own file

    def message_class(self, full_name: str):
        try:
            return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(full_name))
        except KeyError:
            names = ", ".join(self.message_names()[:10]) or "none"
            raise SchemaError(f"no message {full_name!r} in the schema (it has {names})") from None

    def message_names(self) -> list[str]:
        out = []

        def walk(prefix: str, types) -> None:
            for t in types:
                out.append(prefix + t.name)
                walk(prefix + t.name + ".", t.nested_type)

        walk(f"{self.file.package}." if self.file.package else "", self.file.message_type)
        return out

    def name_at(self, indexes: list[int]) -> str:
        """The full name of the message at Confluent's message indexes ([0]: the first)."""
        prefix = f"{self.file.package}." if self.file.package else ""
        types, name = self.file.message_type, ""
        for i in indexes:
            if not 0 <= i < len(types):
                raise SchemaError(f"message index {indexes} is not in the schema")
            name = (name + "." if name else prefix) + types[i].name
            types = types[i].nested_type
        if not name:
            raise SchemaError("no message index in the payload")
        return name


def _check_size(text: str) -> None:
    if len(text) > MAX_SCHEMA_CHARS:
        raise SchemaError(
            f"the schema has {len(text):,} characters; at most {MAX_SCHEMA_CHARS:,} are read"
        )


def compile_schema(kind: str, text: str) -> Compiled:
    if kind not in KINDS:
        raise SchemaError(f"a schema is one of {', '.join(KINDS)}, not {kind!r}")
    _check_size(text)
    return compile_avro(text) if kind == "avro" else compile_protobuf(text)


def compile_avro(text: str) -> Compiled:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"the Avro schema is not JSON: {exc}") from None
    except RecursionError:
        raise SchemaError("the Avro schema is nested too deeply") from None
    named: dict = {}
    try:
        parsed = fastavro.parse_schema(doc, named_schemas=named)
    except UnknownType as exc:
        raise SchemaError(f"the Avro schema does not parse: unknown type {exc}") from None
    except (SchemaParseException, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SchemaError(f"the Avro schema does not parse: {exc}") from None
    except RecursionError:
        raise SchemaError("the Avro schema is nested too deeply") from None
    empty = avro_shape.empty_item_arrays(parsed, named)
    if empty:
        items = json.dumps(empty[0], default=str)[:80]
        raise SchemaError(
            f"the Avro schema has an array whose items take no bytes ({items}): a few bytes "
            "could claim billions of them, so it is not decoded"
        )
    return Compiled("avro", avro=parsed, avro_recursive=bool(avro_shape.recursive_names(named)))


def _descriptor_set(text: str) -> descriptor_pb2.FileDescriptorSet:
    """A .proto text compiled by protoc; or a base64 FileDescriptorProto (what
    Confluent's serializers register and some registries answer)."""
    if "{" not in text:
        try:
            file = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(text, validate=True)
            )
            file.name = file.name or PROTO_FILE
            return descriptor_pb2.FileDescriptorSet(file=[file])
        except (binascii.Error, ValueError, DecodeError):
            pass
    protoc = shutil.which("protoc")
    if protoc is None:
        raise SchemaError("protoc is not installed (apt-get install protobuf-compiler)")
    with tempfile.TemporaryDirectory(prefix="quill-proto-") as tmp:
        with open(os.path.join(tmp, PROTO_FILE), "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(tmp, "set.pb")
        includes = [f"-I{tmp}"]
        if os.path.isdir(WELL_KNOWN_INCLUDE):  # only google/protobuf/*, not all of /usr/include
            includes.append(f"-I{WELL_KNOWN_PREFIX}={WELL_KNOWN_INCLUDE}")
        cmd = [protoc, *includes, "--include_imports", f"--descriptor_set_out={out}", PROTO_FILE]
        global _protoc_runs
        with _runs_lock:
            _protoc_runs += 1
        try:
            run = subprocess.run(
                cmd, cwd=tmp, capture_output=True, timeout=PROTOC_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise SchemaError(f"protoc took more than {PROTOC_TIMEOUT_S} s") from None
        if run.returncode != 0:
            text = run.stderr.decode("utf-8", "replace").replace(tmp + os.sep, "")
            # only what protoc says of the schema's own text: not the lines of a file
            # it found to import (they would show what is on the console's machine)
            lines = [x for x in text.splitlines() if x.startswith(f"{PROTO_FILE}:")]
            why = "; ".join(lines[:3]) or f"protoc exited with {run.returncode}"
            raise SchemaError(f"the .proto does not compile: {why.rstrip('.')}")
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    # protoc also searches <its directory>/../include (/usr/include) whatever -I says
    for file in fds.file:
        if file.name != PROTO_FILE and not file.name.startswith(f"{WELL_KNOWN_PREFIX}/"):
            raise SchemaError(
                f"the .proto imports {file.name!r}: only the well-known types "
                f"({WELL_KNOWN_PREFIX}/...) can be imported"
            )
    return fds


def compile_protobuf(text: str) -> Compiled:
    fds = _descriptor_set(text)
    pool = descriptor_pool.DescriptorPool()
    try:
        for file in fds.file:
            pool.Add(file)
        own = fds.file[-1]  # --include_imports lists dependencies first
        pool.FindFileByName(own.name)
    except (TypeError, KeyError, IndexError) as exc:
        raise SchemaError(f"the Protobuf schema does not load: {exc}") from None
    compiled = Compiled("protobuf", pool=pool, file=own)
    if not compiled.message_names():
        raise SchemaError("the .proto declares no message")
    return compiled


# ---------------------------------------------------------------- decoding


def _plain(value):
    """Avro values that JSON cannot hold: bytes as Avro's JSON encoding does (code points
    0-255), dates and times in ISO 8601, decimals and UUIDs as strings."""
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _depth(value, limit: int = MAX_DEPTH) -> None:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            raise SchemaError(f"the decoded value nests deeper than {limit} levels")
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)


def decode_avro(compiled: Compiled, payload: bytes):
    buf = io.BytesIO(payload)
    reader = _read_py.schemaless_reader if compiled.avro_recursive else fastavro.schemaless_reader
    try:
        value = reader(buf, compiled.avro, None)
    except RecursionError:
        raise SchemaError(f"the value nests deeper than {MAX_DEPTH} levels") from None
    except (EOFError, StopIteration, ValueError, IndexError, TypeError, KeyError) as exc:
        why = str(exc) or type(exc).__name__
        if isinstance(exc, EOFError | StopIteration):
            why = "the payload ends before the record does (truncated?)"
        raise SchemaError(f"not Avro of this schema: {why}") from None
    left = len(payload) - buf.tell()
    if left:
        raise SchemaError(f"not Avro of this schema: {left} bytes left after the record")
    return value


def decode_protobuf(compiled: Compiled, full_name: str, payload: bytes):
    msg = compiled.message_class(full_name)()
    try:
        msg.ParseFromString(payload)
        return json_format.MessageToDict(
            msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    except (DecodeError, RecursionError, ValueError) as exc:
        raise SchemaError(f"not Protobuf {full_name}: {exc or 'does not parse'}") from None


def to_json(value) -> tuple[str, str]:
    """(pretty, compact) JSON texts of a decoded value, depth-checked."""
    _depth(value)
    try:
        pretty = json.dumps(value, indent=2, ensure_ascii=False, default=_plain)
        compact = json.dumps(value, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SchemaError(f"the decoded value has no JSON form: {exc}") from None
    return pretty, compact


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Confluent's message indexes) at pos: (value, next pos)."""
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise SchemaError("the message indexes are truncated")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos


def message_indexes(data: bytes, pos: int) -> tuple[list[int], int]:
    """Confluent's Protobuf message indexes after the schema id: a count, then the
    indexes; a single 0 stands for [0] (the first message)."""
    count, pos = read_varint(data, pos)
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_DEPTH:
        raise SchemaError(f"{count} message indexes is not a valid count")
    out = []
    for _ in range(count):
        i, pos = read_varint(data, pos)
        out.append(i)
    return out, pos
