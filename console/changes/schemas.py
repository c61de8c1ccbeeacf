"""Schemas uploaded per topic (issue 29): operators upload or delete an Avro schema or a
.proto (with the message to decode as) for a topic's keys or values; viewers read them.
Validated by compiling (a schema that does not parse is a 400 with protoc's or
fastavro's sentence), audited with a digest of the text before and after."""

from __future__ import annotations

import hashlib

from cluster_client import clusters, zk
from cluster_client.errors import NotFound, OpError
from console.changes import Actor, validation
from console.roles import OPERATOR
from console.schemas import codec
from console.schemas.decoder import PARTS


def _rows():
    """The uploaded schemas of the current cluster (each cluster has its own)."""
    from console.models import TopicSchema

    return TopicSchema.objects.filter(cluster=clusters.current_name())


def _audit(row) -> dict | None:
    if row is None:
        return None
    return {
        "kind": row.kind,
        "message": row.message,
        "chars": len(row.schema),
        "sha256": hashlib.sha256(row.schema.encode()).hexdigest(),
    }


def _part(part: str) -> str:
    if part not in PARTS:
        raise OpError("A schema is for the topic's key or value.", "part")
    return part


def listing(topic: str) -> list[dict]:
    return [row.as_dict() for row in _rows().filter(topic=topic)]


def upload(actor: Actor, topic: str, part: str, kind: str, schema: str, message: str = "") -> dict:
    actor.require(OPERATOR)
    topic = validation.topic_name(topic, "topic")
    zk.assignment(topic)  # NotFound (404) for an unknown topic
    part = _part(part)
    if kind not in codec.KINDS:
        raise OpError(f"The schema's kind is one of {', '.join(codec.KINDS)}.", "kind")
    schema = (schema or "").strip()
    if not schema:
        raise OpError("Paste the schema: an Avro JSON schema or a .proto text.", "schema")
    message = (message or "").strip()
    try:
        compiled = codec.compile_schema(kind, schema)
        if kind == "protobuf":
            names = compiled.message_names()
            if not message and len(names) == 1:
                message = names[0]
            if not message:
                raise OpError(
                    f"Name the message to decode as: one of {', '.join(names[:10])}.", "message"
                )
            compiled.message_class(message)
        else:
            message = ""
    except codec.SchemaError as exc:
        field = "message" if str(exc).startswith("no message") else "schema"
        raise OpError(f"That schema cannot be used: {str(exc).rstrip('.')}.", field) from None
    row = _rows().filter(topic=topic, part=part).first()
    before = _audit(row)
    row = row or _rows().model(cluster=clusters.current_name(), topic=topic, part=part)
    row.kind, row.schema, row.message = kind, schema, message
    row.updated_by = getattr(actor.user, "username", "") or ""
    row.save()
    actor.done("schema.set", f"topic:{topic}/{part}", before, _audit(row))
    return row.as_dict()


def delete(actor: Actor, topic: str, part: str) -> None:
    actor.require(OPERATOR)
    part = _part(part)
    row = _rows().filter(topic=topic, part=part).first()
    if row is None:
        raise NotFound(f"{topic} has no {part} schema uploaded.")
    before = _audit(row)
    row.delete()
    actor.done("schema.delete", f"topic:{topic}/{part}", before, None)
