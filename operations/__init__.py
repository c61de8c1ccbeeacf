"""Operations: long cluster jobs (reassign, rebalance, elect leaders, compact, rolling
restart, decommission) recorded in the console's database and carried out by the Celery
workers (operations.jobs). models: the job record; service: start (validate, dry run,
enqueue) and cancel/pause for the UI and the API, with roles and audit."""
