"""Operations, a Django app: long cluster jobs (reassign, rebalance, elect leaders,
compact, rolling restart, decommission) recorded in the console's database and carried
out by the Celery worker.

models: the job record (table console_operation, kept from when it was the console's);
service: start (validate, dry run, enqueue) and cancel/pause, with the role check and
audit through the caller's actor; plans: the dry runs; jobs: the job framework (lease,
steps, progress, cancel, pause); kinds/: one runner per kind; planner/: the rebalance
goals; restart/: the restart drivers; cluster: what the jobs ask of the cluster (through
cluster_client); tasks: quill.operation.run and quill.operation.scan_orphans. The pages
and API routes are the console's (console/views/operations.py, console/api/operations.py),
where roles, audit and the page layout live."""
