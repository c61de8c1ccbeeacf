"""/api/groups: list, detail with lag and status, offset reset (dry run by default),
delete. A group id may hold any character, '/' too ({kname:...}, console.converters):
`/lag` and `/reset` at the end of a path are this API's, so the detail of a group whose
id itself ends in "/lag" is read from the list."""

from __future__ import annotations

from ninja import Router, Schema, Status
from pydantic import Field

from console import converters  # noqa: F401 - registers {kname:...}
from console.api.common import actor, viewer
from console.changes import groups as group_ops
from console.changes import validation
from livefeed import history

router = Router(tags=["consumer groups"])


class ResetIn(Schema):
    strategy: str = Field(..., description="earliest, latest, timestamp, offset or shift")
    value: str | None = Field(None, description="timestamp (ms or ISO), offset, or shift by")
    topic: str = Field("", description="one topic; empty: every topic the group committed")
    partitions: list[int] | None = Field(None, description="some partitions of the topic")
    dry_run: bool = Field(True, description="only show what would change")


def _plain(group: dict) -> dict:
    for m in group.get("members", []):
        m["assignment"] = [{"topic": t, "partition": p} for t, p in m["assignment"]]
    return group


@router.get("", summary="Groups with state, lag and Burrow-style status")
def list_groups(request):
    viewer(request)
    return group_ops.summaries()


@router.get("/{kname:group_id}/lag", summary="Lag over the last hour: [[ts, lag, lag_ms], ...]")
def get_lag(request, group_id: str, seconds: int = 3600):
    viewer(request)
    seconds = validation.whole(seconds, "seconds", 1, history.LAG_KEEP, "Seconds")
    return history.lag_series(group_id, seconds)


@router.post("/{kname:group_id}/reset", summary="Reset offsets; dry_run (default) only previews")
def reset(request, group_id: str, body: ResetIn):
    return group_ops.reset(
        actor(request),
        group_id,
        body.topic,
        body.partitions,
        body.strategy,
        body.value,
        dry_run=body.dry_run,
    )


@router.get(
    "/{kname:group_id}", summary="Members, per-partition committed offset, lag, lag in time"
)
def get_group(request, group_id: str):
    viewer(request)
    return _plain(group_ops.detail(group_id))


@router.delete("/{kname:group_id}", response={204: None}, summary="Delete an empty group (admin)")
def delete_group(request, group_id: str):
    group_ops.delete(actor(request), group_id)
    return Status(204, None)
