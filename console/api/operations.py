"""/api/operations: start (or dry-run), list, read, cancel, pause and resume the
cluster's long operations, which the Celery workers carry out."""

from __future__ import annotations

from typing import Literal

from ninja import Router, Schema, Status
from pydantic import Field

from cluster_client import clusters
from console.api.common import actor, viewer
from operations import service
from operations.models import Operation

router = Router(tags=["operations"])

Kind = Literal[
    "rebalance", "reassign", "elect-leaders", "compact", "rolling-restart", "decommission"
]


class PartitionIn(Schema):
    topic: str
    partition: int


class OperationIn(Schema):
    kind: Kind = Field(..., description="what to do")
    dry_run: bool = Field(False, description="only answer what would be done (200), start nothing")
    plan: dict | None = Field(
        None,
        description='reassign: Kafka\'s reassignment JSON {"version": 1, "partitions": '
        '[{"topic", "partition", "replicas"}]}',
    )
    goal: Literal["balance", "add-broker", "remove-broker", "replication-factor"] | None = Field(
        None, description="rebalance: the intent (default balance)"
    )
    brokers: list[int] | None = Field(
        None,
        description="rebalance add-broker/remove-broker: the brokers; rolling-restart: only these",
    )
    topics: list[str] | None = Field(
        None, description="rebalance, elect-leaders: limit to these topics"
    )
    replication_factor: int | None = Field(None, description="rebalance replication-factor")
    throttle: int | None = Field(
        None, description="reassign/rebalance: replication throttle in bytes/s while moving"
    )
    max_moves_per_broker: int | None = Field(
        None, description="reassign/rebalance: concurrent moves per broker (default 5)"
    )
    partitions: list[PartitionIn] | list[int] | None = Field(
        None,
        description="elect-leaders: these partitions ({topic, partition}); "
        "compact: these partition numbers of the topic",
    )
    topic: str | None = Field(None, description="compact: the (compacted) topic")
    clean: bool | None = Field(
        None, description="compact: false only refreshes the cleaner's standing figures"
    )
    broker: int | None = Field(None, description="decommission: the broker to drain and stop")
    gate_timeout_s: int | None = Field(
        None, description="rolling-restart: how long to wait for a broker's availability gate"
    )
    election_type: Literal["preferred", "unclean"] | None = Field(
        None, description="elect-leaders (default preferred)"
    )


class StartedOut(Schema):
    id: int


class OperationOut(Schema):
    id: int
    kind: str
    user: str
    state: str = Field(..., description="pending, running, paused, succeeded, failed, cancelled")
    progress: dict = Field(
        ..., description="done, total, percent; reassignments: bytes_caught_up, eta_s, ..."
    )
    steps: list[dict] = Field(..., description="the step log: [{at, message}]")
    result: dict | None
    params: dict
    error: str
    created: str | None
    started: str | None
    finished: str | None
    cancel_requested: bool
    pause_requested: bool


@router.post(
    "",
    response={200: dict, 202: StartedOut},
    summary="Start an operation (202 with its id), or a dry run (200 with the proposal)",
)
def start(request, body: OperationIn):
    data = body.dict(exclude_none=True)
    status, answer = service.start(actor(request), data)
    return Status(status, answer)


@router.get("", summary="Operations, newest first")
def list_operations(request, limit: int = 100):
    viewer(request)
    return [
        op.as_dict(full=False)
        for op in Operation.objects.filter(cluster=clusters.current_name())[
            : max(1, min(limit, 1000))
        ]
    ]


@router.get("/{op_id}", response=OperationOut, summary="State, progress, step log and result")
def get_operation(request, op_id: int):
    viewer(request)
    return service.get(op_id).as_dict()


@router.post("/{op_id}/cancel", summary="Cancel (moves in flight go back to their replicas)")
def cancel(request, op_id: int):
    return service.cancel(actor(request), op_id)


@router.post("/{op_id}/pause", summary="Pause at the next step")
def pause(request, op_id: int):
    return service.pause(actor(request), op_id, True)


@router.post("/{op_id}/resume", summary="Resume a paused operation")
def resume(request, op_id: int):
    return service.pause(actor(request), op_id, False)
