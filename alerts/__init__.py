"""Lag alerts: rules on consumer groups (Burrow status, or lag in time over a limit),
evaluated by Celery beat (alerts.tasks) from the monitor's group status, notified by
webhook and e-mail; every firing and resolution is kept (the group page shows them)."""
