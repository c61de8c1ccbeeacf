"""Lag alerts, a Django app: rules on consumer groups (Burrow status, or lag in time over
a limit), evaluated by Celery beat (alerts.tasks: quill.alerts.evaluate) from the
monitor's group status (livefeed.history), notified by webhook (webhook) and e-mail;
every firing and resolution is kept (the group page shows them). service: create and
delete rules. Tables console_alertrule and console_alertevent, kept from when the models
were the console's; the API routes are the console's (console/api/alerts.py)."""
