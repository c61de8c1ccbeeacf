"""Starting, cancelling and pausing operations, for the UI and the API alike: the role
check, the input check (a refusal changes nothing), the dry run, the job record, the
Celery message, and the audit log.

Kinds and their fields:
- reassign: plan (Kafka's reassignment JSON), throttle (bytes/s), max_moves_per_broker;
- rebalance: goal balance | add-broker | remove-broker | replication-factor, brokers
  (for add/remove), topics (scope; default every topic), replication_factor, throttle,
  max_moves_per_broker; a dry run answers the proposal;
- elect-leaders: partitions [{"topic", "partition"}] or topics, else every partition;
  election_type preferred | unclean.
"""

from __future__ import annotations

from django.db import transaction

from cluster_client import clusters
from cluster_client.errors import NotFound, OpError
from operations.models import ACTIVE, KINDS, Operation

# The console's role names (console.roles); `actor` is the console's Actor (console.changes):
# actor.require(role) refuses with 403, actor.done(...) writes the audit log.
OPERATOR, ADMIN = "operator", "admin"

ADMIN_KINDS = {"rolling-restart", "decommission"}
MOVING_KINDS = {"reassign", "rebalance", "decommission"}


def _plan_kinds():
    from operations import plans

    return {
        "reassign": plans.reassign,
        "rebalance": plans.rebalance,
        "elect-leaders": plans.elect_leaders,
        "compact": plans.compact,
        "rolling-restart": plans.rolling_restart,
        "decommission": plans.decommission,
    }


def start(actor, body: dict) -> tuple[int, dict]:
    """(200, proposal) for a dry run, (202, {"id": ...}) for a started operation."""
    kind = body.get("kind")
    if kind not in KINDS:
        raise OpError(f"kind must be one of {', '.join(KINDS)}.", "kind")
    actor.require(ADMIN if kind in ADMIN_KINDS else OPERATOR)
    makers = _plan_kinds()
    if kind not in makers:
        raise OpError(f"{kind} operations are not available yet.", "kind", status=501)
    params, preview = makers[kind](body)
    if kind in MOVING_KINDS:
        _refuse_conflicts(params)
    if body.get("dry_run"):
        return 200, {"dry_run": True, "kind": kind, **preview}
    with transaction.atomic():
        op = Operation.objects.create(
            cluster=clusters.current_name(),
            kind=kind,
            params=params,
            user=actor.user if actor.user.is_authenticated else None,
            username=actor.user.get_username(),
            source=actor.source,
        )
    actor.done("operation.start", f"operation:{op.id}", after={"kind": kind, **_summary(params)})
    enqueue(op.id)
    _publish(op, refresh=True)  # the list pages show the new row
    return 202, {"id": op.id}


def _summary(params: dict) -> dict:
    """What the audit log keeps of the params (a plan can be large)."""
    out = {k: v for k, v in params.items() if k != "plan"}
    if "plan" in params:
        out["partitions"] = len(params["plan"].get("partitions", []))
    return out


def enqueue(op_id: int) -> None:
    from operations.tasks import run_operation

    transaction.on_commit(lambda: run_operation.delay(op_id))


def _parts(params: dict) -> set[tuple[str, int]]:
    return {(p["topic"], int(p["partition"])) for p in params.get("plan", {}).get("partitions", [])}


def _refuse_conflicts(params: dict) -> None:
    from operations import cluster

    wanted = _parts(params)
    here = Operation.objects.filter(cluster=clusters.current_name())
    for other in here.filter(state__in=ACTIVE, kind__in=MOVING_KINDS):
        clash = wanted & _parts(other.params)
        if clash:
            t, p = min(clash)
            raise OpError(
                f"Operation {other.id} ({other.kind}, {other.state}) already moves {t}-{p}; "
                "cancel it or wait for it to end.",
                "plan",
                status=409,
            )
    moving = wanted & set(cluster.list_reassignments())
    if moving:
        t, p = min(moving)
        raise OpError(
            f"{t}-{p} is being reassigned already (outside this console); "
            "wait for it or cancel it first.",
            "plan",
            status=409,
        )


def get(op_id: int) -> Operation:
    try:
        return Operation.objects.get(id=op_id, cluster=clusters.current_name())
    except Operation.DoesNotExist:
        raise NotFound(f"Operation {op_id} does not exist.") from None


def cancel(actor, op_id: int) -> dict:
    op = get(op_id)
    actor.require(ADMIN if op.kind in ADMIN_KINDS else OPERATOR)
    if not op.active:
        raise OpError(
            f"Operation {op_id} has ended ({op.state}); there is nothing to cancel.", status=409
        )
    Operation.objects.filter(id=op_id).update(cancel_requested=True)
    actor.done("operation.cancel", f"operation:{op_id}", before={"state": op.state})
    op.refresh_from_db()
    _publish(op)
    return op.as_dict(full=False)


def pause(actor, op_id: int, paused: bool) -> dict:
    op = get(op_id)
    actor.require(ADMIN if op.kind in ADMIN_KINDS else OPERATOR)
    if not op.active:
        raise OpError(f"Operation {op_id} has ended ({op.state}).", status=409)
    Operation.objects.filter(id=op_id).update(pause_requested=paused)
    actor.done("operation.pause" if paused else "operation.resume", f"operation:{op_id}")
    op.refresh_from_db()
    _publish(op)
    return op.as_dict(full=False)


def _publish(op: Operation, refresh: bool = False) -> None:
    from operations.jobs import publish

    publish(op, refresh)
