"""The job framework every operation shares.

A job is an Operation row (operations.models). `run(op_id)` (the Celery task
quill.operation.run) claims it with a lease, calls the runner registered for its kind
with a `Job`, and records how it ended. Runners are written to be resumed: they keep
what they have done in `job.checkpoint` and start each run by reading the cluster's
state, so running one twice, or again after its worker was killed, continues instead of
repeating.

Leases: the claim is one conditional UPDATE (lease free, expired, ours, or held by a
dead process of this worker node: node names are unique among running workers), renewed
at every `job.check()`. A killed worker's jobs are taken up when it starts again (see
operations.tasks: worker_ready scans for them) or by any worker once the lease expires
(beat's orphan-scan entry, operations.tasks.scan_orphans).

`job.check()` is where a runner stops: it raises Cancelled when the operator asked to
cancel, and blocks (state paused) while a pause is asked for. Every change to the
record is mirrored to the channel layer (groups `operations` and `operation:<id>`),
so the console's pages update live.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db.models import F, Q
from django.utils import timezone

from cluster_client import clusters
from livefeed.groups import channel_group, message
from operations.models import (
    ACTIVE,
    CANCELLED,
    FAILED,
    PAUSED,
    PENDING,
    RUNNING,
    STEPS_KEPT,
    SUCCEEDED,
    Operation,
)

log = logging.getLogger(__name__)
LEASE_S = 30
RUNNERS: dict[str, Callable[[Job], dict | None]] = {}
_here: set[int] = set()  # operations running in this process
_here_lock = threading.Lock()
NODE = os.environ.get("QUILL_WORKER_NODE") or f"worker@{socket.gethostname()}"
OWNER = f"{NODE}|{os.getpid()}|{uuid.uuid4().hex[:6]}"


class Cancelled(Exception):
    """Raised by job.check() when the operator cancelled; a runner may catch it to undo
    (Kafka's cancel semantics) and re-raise with a result."""

    def __init__(self, result: dict | None = None):
        super().__init__("cancelled")
        self.result = result


class JobFailed(Exception):
    """A runner's refusal or failure, as a sentence for the operator."""

    def __init__(self, message: str, result: dict | None = None):
        super().__init__(message)
        self.message = message
        self.result = result


def runner(kind: str):
    def register(fn):
        RUNNERS[kind] = fn
        return fn

    return register


def publish(op: Operation, refresh: bool = False) -> None:
    """Send the record to the pages watching it; a channel layer that is down only
    costs the live view. `refresh` (a job starts or ends) makes the pages fetch
    themselves again (new rows in the list, the result on the detail page)."""
    layer = get_channel_layer()
    if layer is None:
        return
    data = {"operation": op.as_dict(full=False), "set": live_cells(op), "refresh": refresh}
    try:
        for sub in ("operations", f"operation:{op.id}"):
            group = channel_group(sub, op.cluster)
            async_to_sync(layer.group_send)(group, message(data))
    except Exception:  # noqa: BLE001 - Redis down: the record in the database stays right
        log.warning("could not publish operation %s to the channel layer", op.id, exc_info=True)


def live_cells(op: Operation) -> dict:
    """The cells the Operations pages patch (data-k keys; console.js). Data only, never
    markup: a bar's width ("w", percent) and a list's items ("l", texts), which the
    page builds with textContent and the CSSOM (the Content-Security-Policy)."""
    percent = op.progress.get("percent", 100.0 if op.state == SUCCEEDED else 0)
    steps = [f"{s['at'][11:19]} {s['message']}" for s in op.steps]
    done, total = op.progress.get("done", 0), op.progress.get("total", "?")
    return {
        f"op:{op.id}:state": {"t": op.state},
        f"op:{op.id}:pct": {"t": f"{percent} %"},
        f"op:{op.id}:bar": {"w": percent},
        f"op:{op.id}:detail": {"t": f"{done} / {total}"},
        f"op:{op.id}:steps": {"l": steps},
        f"op:{op.id}:error": {"t": op.error},
    }


class Job:
    """The runner's handle on its record."""

    def __init__(self, op: Operation):
        self.op = op

    @property
    def params(self) -> dict:
        return self.op.params

    @property
    def checkpoint(self) -> dict:
        return self.op.checkpoint

    def _save(self, *fields: str) -> None:
        self.op.lease_until = timezone.now() + timedelta(seconds=LEASE_S)
        self.op.save(update_fields=[*fields, "lease_until", "updated"])
        publish(self.op)

    def step(self, message: str) -> None:
        log.info("operation %s: %s", self.op.id, message)
        self.op.steps = [*self.op.steps, {"at": timezone.now().isoformat(), "message": message}]
        self.op.steps = self.op.steps[-STEPS_KEPT:]
        self._save("steps")

    def progress(self, **fields) -> None:
        """Merge into progress; `done`/`total` also set `percent`."""
        new = {**self.op.progress, **fields}
        if new.get("total"):
            new["percent"] = round(100.0 * new.get("done", 0) / new["total"], 1)
        self.op.progress = new
        self._save("progress")

    def save_checkpoint(self, **fields) -> None:
        self.op.checkpoint = {**self.op.checkpoint, **fields}
        self._save("checkpoint")

    def check(self) -> None:
        """Renew the lease; raise Cancelled, or wait here while paused."""
        flags = Operation.objects.filter(id=self.op.id).values(
            "cancel_requested", "pause_requested"
        )[0]
        if flags["cancel_requested"]:
            raise Cancelled()
        if flags["pause_requested"]:
            self.op.state = PAUSED
            self.step("paused")
            self._save("state")
            while True:
                time.sleep(1)
                flags = Operation.objects.filter(id=self.op.id).values(
                    "cancel_requested", "pause_requested"
                )[0]
                if flags["cancel_requested"]:
                    raise Cancelled()
                if not flags["pause_requested"]:
                    break
                self._save()
            self.op.state = RUNNING
            self._save("state")
            self.step("resumed")
        else:
            self._save()

    def sleep(self, seconds: float) -> None:
        """Wait, checking for cancel and pause every second."""
        end = time.monotonic() + seconds
        while True:
            self.check()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(1.0, left))

    def wait_for(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        """Poll `condition` every second (checking cancel/pause); JobFailed after timeout."""
        end = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > end:
                raise JobFailed(f"Gave up after {timeout_s:.0f} s waiting for {what}.")
            self.sleep(1)


def claim(op_id: int) -> Operation | None:
    """Take the lease on an active operation, or None when another live worker has it."""
    with _here_lock:
        if op_id in _here:
            return None
        now = timezone.now()
        free = (
            Q(lease_until__isnull=True)
            | Q(lease_until__lt=now)
            | Q(lease_owner=OWNER)
            | Q(lease_owner__startswith=f"{NODE}|")
        )
        taken = (
            Operation.objects.filter(id=op_id, state__in=ACTIVE)
            .filter(free)
            .update(
                lease_owner=OWNER,
                lease_until=now + timedelta(seconds=LEASE_S),
                attempts=F("attempts") + 1,
            )
        )
        if not taken:
            return None
        _here.add(op_id)
    return Operation.objects.get(id=op_id)


def _finish(job: Job, state: str, result=None, error: str = "") -> None:
    op = job.op
    op.state, op.error, op.finished = state, error, timezone.now()
    if result is not None:
        op.result = result
    op.lease_owner, op.lease_until = "", None
    op.save(update_fields=["state", "error", "finished", "result", "lease_owner", "lease_until"])
    publish(op, refresh=True)


def run(op_id: int) -> str:
    """Run (or resume) one operation to its end; returns its final state."""
    op = claim(op_id)
    if op is None:
        return "not claimed"
    job = Job(op)
    try:
        fn = RUNNERS.get(op.kind)
        if op.state == PENDING:
            op.started = timezone.now()
            op.state = RUNNING
            op.save(update_fields=["started", "state"])
            job.step(f"started on {NODE}")
        else:
            op.state = RUNNING
            op.save(update_fields=["state"])
            job.step(f"resumed on {NODE} (attempt {op.attempts})")
        if fn is None:
            raise JobFailed(f"No worker here runs {op.kind!r} operations.")
        with clusters.activate(op.cluster):  # the job acts on its own cluster
            result = fn(job)
        job.step("succeeded")
        _finish(job, SUCCEEDED, result)
    except Cancelled as exc:
        job.step("cancelled")
        _finish(job, CANCELLED, exc.result)
    except JobFailed as exc:
        job.step(f"failed: {exc.message}")
        _finish(job, FAILED, exc.result, exc.message)
    except Exception as exc:  # noqa: BLE001 - any bug ends the job as failed, with why
        log.exception("operation %s failed", op_id)
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        job.step(f"failed: {message}")
        _finish(job, FAILED, None, message)
    finally:
        with _here_lock:
            _here.discard(op_id)
    return job.op.state


def orphans(startup: bool = False) -> list[int]:
    """Active operations no live worker holds: held by a dead process of this node, with
    a lapsed lease, or never claimed (at startup: all of them, since a killed worker's
    unacknowledged message comes back only after Redis's visibility timeout; later:
    those waiting for over a lease, whose message was lost)."""
    now = timezone.now()
    held_here = Q(lease_owner__startswith=f"{NODE}|") & ~Q(lease_owner=OWNER)
    unclaimed = Q(lease_until__isnull=True)
    if not startup:
        unclaimed &= Q(created__lt=now - timedelta(seconds=LEASE_S))
    loose = unclaimed | held_here | Q(lease_until__lt=now)
    ids = Operation.objects.filter(state__in=ACTIVE).filter(loose).values_list("id", flat=True)
    with _here_lock:
        return [i for i in ids if i not in _here]
