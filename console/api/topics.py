"""/api/topics: list, create, detail with partitions and per-replica LEO, delete,
configs (read, change), partitions (add), schemas uploaded for keys and values."""

from __future__ import annotations

from ninja import Router, Schema, Status
from pydantic import Field

from cluster_client import admin, state
from console.api.common import actor, viewer
from console.changes import schemas as schema_ops
from console.changes import topics as topic_ops

router = Router(tags=["topics"])


class TopicIn(Schema):
    name: str
    partitions: int = Field(1, description="number of partitions")
    replication_factor: int = Field(1, description="replicas per partition")
    configs: dict[str, str] = Field(default_factory=dict, description="topic config overrides")


class ConfigsIn(Schema):
    set: dict[str, str] = Field(default_factory=dict, description="keys to set")
    delete: list[str] = Field(default_factory=list, description="keys back to their default")


class SchemaIn(Schema):
    kind: str = Field(..., description="avro or protobuf")
    schema_text: str = Field(..., alias="schema", description="Avro JSON schema or .proto text")
    message: str = Field("", description="Protobuf: the message's full name, e.g. shop.Order")


class PartitionsIn(Schema):
    count: int = Field(..., description="the new total number of partitions")


@router.get("", summary="Topics with partitions, RF, under-replicated count and size")
def list_topics(request):
    viewer(request)
    summary = state.overview()
    sizes = state.topic_sizes([b for b in summary["brokers"] if b["alive"]])
    return [
        {"name": t, **info, "size": sizes.get(t)} for t, info in sorted(summary["topics"].items())
    ]


@router.post("", response={201: dict}, summary="Create a topic")
def create_topic(request, body: TopicIn):
    result = topic_ops.create(
        actor(request), body.name, body.partitions, body.replication_factor, body.configs
    )
    return Status(201, result)


@router.get("/{name}", summary="Partitions: leader, replicas, ISR, log start, HW, replica LEO/lag")
def get_topic(request, name: str):
    viewer(request)
    detail = state.topic_detail(name)
    for row in detail["partitions"]:
        row["replicas_detail"] = row.pop("replica_detail")
    return detail


@router.delete("/{name}", response={204: None}, summary="Delete a topic (admin)")
def delete_topic(request, name: str):
    topic_ops.delete(actor(request), name)
    return Status(204, None)


@router.get("/{name}/configs", summary="Every config with its value and source")
def get_configs(request, name: str):
    viewer(request)
    state.zk.assignment(name)  # 404 for an unknown topic
    return admin.topic_configs(name)


@router.patch("/{name}/configs", summary="Set or reset configs; returns the overrides")
def patch_configs(request, name: str, body: ConfigsIn):
    return topic_ops.alter_configs(actor(request), name, body.set, body.delete)


@router.post("/{name}/partitions", summary="Add partitions (a new total)")
def add_partitions(request, name: str, body: PartitionsIn):
    return topic_ops.add_partitions(actor(request), name, body.count)


@router.get("/{name}/schemas", summary="Schemas uploaded for the topic's keys and values")
def get_schemas(request, name: str):
    viewer(request)
    return schema_ops.listing(name)


@router.put(
    "/{name}/schemas/{part}",
    summary="Upload the key or value schema (operator); 400 when it does not compile",
)
def put_schema(request, name: str, part: str, body: SchemaIn):
    return schema_ops.upload(actor(request), name, part, body.kind, body.schema_text, body.message)


@router.delete("/{name}/schemas/{part}", response={204: None}, summary="Delete a schema (operator)")
def delete_schema(request, name: str, part: str):
    schema_ops.delete(actor(request), name, part)
    return Status(204, None)
