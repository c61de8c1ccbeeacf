"""Quill across hosts: a fault-injection harness with a checker (issue 27).

netns (hosts on a bridge) -> cluster (ZooKeeper and brokers in them) -> nemesis (faults)
-> workload/client (Kafka clients in client hosts) -> checker and converge (Jepsen's
properties) -> run (one run end to end). Used by tests/test_faults_*.py and
bench/faults.py.
"""
