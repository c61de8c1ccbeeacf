"""Celery workers for operations jobs (reassignment, compaction triggers, rolling ops)."""

from workers.celery import app

__all__ = ["app"]
