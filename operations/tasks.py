"""The operations' Celery tasks: quill.operation.run (one operation to its end) and
quill.operation.scan_orphans.

quill.operation.run is acknowledged late and rejected (requeued) when its worker is
lost, and is safe to receive twice (operations.jobs leases). A worker that starts takes up
the operations a killed worker left (worker_ready), and quill.operation.scan_orphans,
which beat sends every ORPHAN_SCAN_S (the "orphan-scan" entry in workers.celery), takes
up those whose lease lapsed or whose message was lost.
"""

import logging
import os

from celery.signals import worker_ready
from django.db.utils import OperationalError

from operations import jobs, kinds  # noqa: F401  (kinds registers the runners)
from workers.celery import ORPHAN_SCAN_S, app

log = logging.getLogger(__name__)


@app.task(name="quill.operation.run", acks_late=True, reject_on_worker_lost=True)
def run_operation(op_id: int) -> str:
    return jobs.run(int(op_id))


def take_up_orphans(startup: bool = False) -> list[int]:
    ids = jobs.orphans(startup=startup)
    for op_id in ids:
        log.info("taking up operation %s", op_id)
        run_operation.delay(op_id)
    return ids


@app.task(name="quill.operation.scan_orphans", ignore_result=True)
def scan_orphans() -> list[int]:
    """Beat's "orphan-scan" entry: take up the active operations no live worker holds."""
    try:
        return take_up_orphans()
    except Exception:  # noqa: BLE001 - a database hiccup: beat sends the next scan
        log.exception("orphan scan failed")
        return []


@worker_ready.connect
def _on_worker_ready(sender=None, **kwargs):
    if sender is not None and getattr(sender, "hostname", None):
        jobs.NODE = sender.hostname
        jobs.OWNER = f"{jobs.NODE}|{os.getpid()}|{jobs.OWNER.rsplit('|', 1)[-1]}"

    try:
        take_up_orphans(startup=True)
    except OperationalError as exc:  # the console migrates at its own start: not yet
        log.warning(
            "operations table not ready (%s); beat's scan retries every %s s", exc, ORPHAN_SCAN_S
        )
    except Exception:  # noqa: BLE001 - a database hiccup: beat's scan retries
        log.exception("startup scan for operations failed")
