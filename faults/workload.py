"""The workload: faults.client processes inside the client hosts, their output in
files, read back as histories for the checker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from faults.netns import Host
from quill_stack.services import PROJECT_ROOT

TOPIC = "faults"  # idempotent producers; group members consume it
TXN_TOPIC = "faults-txn"  # transactional producers
PARTITIONS = 3


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
              for t in (TOPIC, TXN_TOPIC)]  # fmt: skip
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(60)


class Client:
    """One faults.client process in a client host. Every client started is listed in
    `Client.running` until it is waited for, so a run that fails can kill the rest."""

    running: list[Client] = []

    def __init__(self, host: Host, out_dir: Path, name: str, *args: str):
        self.name = name
        self.out = out_dir / f"{name}.jsonl"
        self.err = out_dir / f"{name}.err"
        env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "PYTHONUNBUFFERED": "1"}
        argv = [*host.exec_prefix(), sys.executable, "-m", "faults.client", *args]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env,
                                         cwd=PROJECT_ROOT, start_new_session=True)  # fmt: skip
        Client.running.append(self)

    def wait(self, timeout: float) -> int:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        if self in Client.running:
            Client.running.remove(self)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @classmethod
    def kill_all(cls) -> None:
        while cls.running:
            cls.running.pop().kill()

    def history(self) -> list[dict]:
        rows = []
        for line in self.out.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line cut short by a kill
        return rows
