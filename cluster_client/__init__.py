"""The operator-side cluster client: how the console, the operations jobs, the alert
rules and the pipeline reach a Quill (Kafka) cluster, as any operator tool would.

- zk: ZooKeeper through kazoo (brokers, topics, config entities, quotas, compaction
  requests); watcher and picture: ZooKeeper watches kept for big clusters;
- admin, records, security: the admin APIs and consumers/producers through librdkafka;
- wire and client_socket: single requests over the Kafka protocol to one chosen broker;
- client_security: the client properties (TLS, SASL) of the process's environment;
- errors: OpError and its kinds, the sentences every caller shows;
- state, redact: the cluster's state as pages and jobs read it; secrets kept out of it.

It imports the broker's protocol and ZooKeeper codecs only, never the console,
the operations or alerts apps, or the workers.
"""
