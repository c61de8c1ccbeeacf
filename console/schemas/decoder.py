"""Decoding one page's records: Confluent's wire format (magic byte 0, a 4-byte
big-endian schema id, for Protobuf the message indexes, then the payload) with the
schema registry, else the schema uploaded for the topic's keys or values. Bounded by
payload size and a decode time budget per page; what cannot be decoded is shown raw
with the reason."""

from __future__ import annotations

import functools
import json
import time

from cluster_client import clusters
from console.schemas import codec, registry
from console.schemas.codec import Compiled, SchemaError

DECODE_BUDGET_S = 2.0  # decoding time a page may spend (a search uses its own budget)
PARTS = ("key", "value")
COMPILED_CACHE_SIZE = 64  # uploaded schemas kept compiled (a .proto costs a protoc run)


@functools.lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compile_uploaded(kind: str, text: str) -> Compiled:
    """An uploaded schema compiled once per process while its text is unchanged (a
    changed upload is a new key; a failure is not kept: the next page tries again)."""
    return codec.compile_schema(kind, text)


def _decoded(badge: str, value) -> dict:
    pretty, compact = _raise_as(badge, codec.to_json, value)
    return {"badge": badge, "json": pretty, "text": compact, "error": None}


def _failed(badge: str, why: str) -> dict:
    return {"badge": badge, "json": None, "text": None, "error": why}


class Decoder:
    """Decodes the keys and values of one topic's records for one page or search."""

    def __init__(self, topic: str, deadline: float | None = None):
        from console.models import TopicSchema  # the app registry is ready by now

        self.topic = topic
        self.deadline = deadline or time.monotonic() + DECODE_BUDGET_S
        self.registry = registry.registry_settings() is not None
        self.uploaded: dict[str, tuple] = {}
        here = TopicSchema.objects.filter(cluster=clusters.current_name())
        for row in here.filter(topic=topic):
            self.uploaded[row.part] = (row, None)  # compiled on first use

    @property
    def active(self) -> bool:
        """Whether any record of this topic could be decoded (else skip the work)."""
        return self.registry or bool(self.uploaded)

    def decode(self, data: bytes | None, part: str) -> dict | None:
        """{"badge", "json" (pretty), "text" (compact), "error"} or None when no schema
        applies (not wire format and nothing uploaded for this part)."""
        if data is None or not self.active:
            return None
        wire = self.registry and len(data) >= 5 and data[0] == 0
        if not wire and part not in self.uploaded:
            return None
        if len(data) > codec.MAX_PAYLOAD_BYTES:
            return _failed(
                "schema", f"{len(data):,} bytes: larger than {codec.MAX_PAYLOAD_BYTES:,}"
            )
        if time.monotonic() > self.deadline:
            return _failed("schema", "not decoded: this page's decode time budget is spent")
        try:
            return self._wire(data) if wire else self._uploaded(data, part)
        except SchemaError as exc:
            failed = _failed(getattr(exc, "badge", "schema"), str(exc))
        except RecursionError:  # json.loads of b"[" * 100000, or any decoder's deep value
            failed = _failed("schema", f"the value nests deeper than {codec.MAX_DEPTH} levels")
        if wire and part in self.uploaded:  # a raw payload that happens to start with 0
            try:
                return self._uploaded(data, part)
            except SchemaError:
                pass
        return failed

    def _wire(self, data: bytes) -> dict:
        schema_id = int.from_bytes(data[1:5], "big")
        compiled = _raise_as(f"schema {schema_id}", registry.schema, schema_id)
        if compiled.kind == "avro":
            return _decoded(
                f"Avro, schema {schema_id}",
                _raise_as(f"Avro, schema {schema_id}", codec.decode_avro, compiled, data[5:]),
            )
        if compiled.kind == "json":
            try:
                return _decoded(f"JSON, schema {schema_id}", json.loads(data[5:]))
            except ValueError as exc:
                raise _badged(f"JSON, schema {schema_id}", f"not JSON: {exc}") from None
        indexes, pos = _raise_as(f"Protobuf, schema {schema_id}", codec.message_indexes, data, 5)
        name = _raise_as(f"Protobuf, schema {schema_id}", compiled.name_at, indexes)
        badge = f"Protobuf {name}, schema {schema_id}"
        return _decoded(badge, _raise_as(badge, codec.decode_protobuf, compiled, name, data[pos:]))

    def _uploaded(self, data: bytes, part: str) -> dict:
        row, compiled = self.uploaded[part]
        badge = f"Avro ({part} schema)" if row.kind == "avro" else f"Protobuf {row.message}"
        if compiled is None:
            compiled = _raise_as(badge, _compile_uploaded, row.kind, row.schema)
            self.uploaded[part] = (row, compiled)
        if row.kind == "avro":
            return _decoded(badge, _raise_as(badge, codec.decode_avro, compiled, data))
        return _decoded(badge, _raise_as(badge, codec.decode_protobuf, compiled, row.message, data))

    def annotate(self, out: dict, msg) -> dict:
        """Adds key_schema / value_schema to a record dict (only when a schema applies)."""
        for part, data in (("key", msg.key()), ("value", msg.value())):
            got = self.decode(data, part)
            if got is not None:
                out[f"{part}_schema"] = got
        return out


def _badged(badge: str, why: str) -> SchemaError:
    exc = SchemaError(why)
    exc.badge = badge
    return exc


def _raise_as(badge: str, fn, *args):
    """fn(*args), its SchemaError carrying the badge of what was tried."""
    try:
        return fn(*args)
    except SchemaError as exc:
        if not hasattr(exc, "badge"):
            exc.badge = badge
        raise


__all__ = ["Compiled", "Decoder", "PARTS"]
