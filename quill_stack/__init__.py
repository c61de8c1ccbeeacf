"""quill-stack: run Quill's local stack (ZooKeeper, Redis, brokers, worker, console).

`services` knows how to start and health-check each process; `process` runs one;
`supervisor` runs them all with restarts; `cli` is the `quill-stack` command.
tests/conftest.py uses `services` and `process` too, so tests start services exactly
as the stack does. `secure` and `tls` make the SASL_SSL stack (QUILL_SECURITY=sasl_ssl);
`client_security` and `client_socket` give every Quill client (console, monitor,
workers, pipeline) its credentials from the environment.
"""
