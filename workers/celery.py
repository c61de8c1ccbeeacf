"""The Celery app: Redis as transport and result backend, settings from Django's
(`CELERY_*` in console/settings.py, which reads QUILL_REDIS_URL).

The worker process is this app; the tasks it runs live with the apps that own their
records (operations.tasks, alerts.tasks), named by their stable task names
(quill.operation.run, quill.operation.scan_orphans, quill.alerts.evaluate) so messages
queued and beat entries written before a move still find them.
"""

import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

# how often beat has a worker take up operations no worker holds (QUILL_ORPHAN_SCAN_S)
ORPHAN_SCAN_S = settings.QUILL_ORPHAN_SCAN_S

app = Celery("quill", include=["workers.tasks", "operations.tasks", "alerts.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery beat (the worker runs it embedded, -B): lag alert rules every
# QUILL_ALERT_EVALUATE_S (10 s), and the
# scan for orphaned operations (operations.tasks.scan_orphans); a scan no worker picked up
# before the next one is due is dropped rather than queued behind it.
app.conf.beat_schedule = {
    "lag-alerts": {"task": "quill.alerts.evaluate", "schedule": settings.QUILL_ALERT_EVALUATE_S},
    "orphan-scan": {
        "task": "quill.operation.scan_orphans",
        "schedule": ORPHAN_SCAN_S,
        "options": {"expires": ORPHAN_SCAN_S},
    },
}
