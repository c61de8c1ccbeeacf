"""The Celery worker process (`celery -A workers worker -B`): the app, its beat schedule
and quill.ping. The tasks it runs live with their apps (operations.tasks, alerts.tasks)."""

from workers.celery import app

__all__ = ["app"]
