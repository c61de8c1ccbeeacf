"""The Celery app: Redis as transport and result backend, settings from Django's
(`CELERY_*` in console/settings.py, which reads QUILL_REDIS_URL)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("quill", include=["workers.tasks", "workers.alerts"])
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery beat (the worker runs it embedded, -B): lag alert rules every 10 s.
app.conf.beat_schedule = {
    "lag-alerts": {"task": "quill.alerts.evaluate", "schedule": 10.0},
}
