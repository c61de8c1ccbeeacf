"""quill-stack: run Quill's local stack (ZooKeeper, Redis, brokers, worker, console).

`services` knows how to start and health-check each process; `process` runs one;
`supervisor` runs them all with restarts; `cli` is the `quill-stack` command.
tests/conftest.py uses `services` and `process` too, so tests start services exactly
as the stack does.
"""
