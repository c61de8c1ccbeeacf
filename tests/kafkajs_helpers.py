"""KafkaJS (npm) as a test client: tests/kafkajs/driver.js runs a JSON scenario of
steps (admin calls, produce, transactions, consume) with one KafkaJS client in one node
process and reports what happened; these helpers build the scenario and read the
report back into bytes and ints, so the assertions stay in pytest.

KafkaJS is installed by scripts/install.sh (``npm ci --prefix tests/kafkajs``)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

KAFKAJS_DIR = Path(__file__).with_name("kafkajs")
DRIVER = KAFKAJS_DIR / "driver.js"
# KafkaJS's ConfigResourceTypes (Kafka's resource type codes)
TOPIC_CONFIG, BROKER_CONFIG = 2, 4
LOG_TAIL_CHARS = 4000
RUN_TIMEOUT_S = 300.0  # a whole scenario; each consume step has its own wait (waitMs)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _b64_header(value: bytes | list[bytes]) -> str | list[str]:
    return [_b64(v) for v in value] if isinstance(value, list) else _b64(value)


def _unb64_header(value: str | list[str]) -> bytes | list[bytes]:
    return [_unb64(v) for v in value] if isinstance(value, list) else _unb64(value)


def message(
    value: bytes | None,
    key: bytes | None = None,
    headers: dict[str, bytes | list[bytes]] | None = None,
    partition: int | None = None,
) -> dict:
    """One record for a produce or transaction step; a header with a list of values is
    that key repeated, as KafkaJS writes it."""
    out: dict = {"value": _b64(value), "key": _b64(key)}
    if headers:
        out["headers"] = {k: _b64_header(v) for k, v in headers.items()}
    if partition is not None:
        out["partition"] = partition
    return out


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes | list[bytes]]  # a repeated key's values as a list


@dataclass
class Member:
    """One consumer of a consume step: the records it read in order, its member id and
    assignment ({topic: [partitions]}) from its last GROUP_JOIN, and its crashes."""

    records: list[Record]
    member_id: str | None
    assignment: dict[str, list[int]]
    joins: int
    crashes: list[dict] = field(default_factory=list)

    @classmethod
    def from_report(cls, report: dict) -> Member:
        join = report["join"] or {}
        return cls(
            records=[_record(r) for r in report["records"]],
            member_id=join.get("memberId"),
            assignment={t: sorted(ps) for t, ps in (join.get("assignment") or {}).items()},
            joins=report["joins"],
            crashes=report["crashes"],
        )


def _record(r: dict) -> Record:
    return Record(
        topic=r["topic"],
        partition=r["partition"],
        offset=int(r["offset"]),
        key=_unb64(r["key"]),
        value=_unb64(r["value"]),
        headers={k: _unb64_header(v) for k, v in r["headers"].items()},
    )


@dataclass
class Result:
    """One step's outcome: ``value`` (JSON as KafkaJS returned it) or ``error`` (its
    class name, protocol error type, retriable flag, and causes)."""

    ok: bool
    raw: object = None
    error: dict | None = None
    log: str = ""  # the end of KafkaJS's log (warnings and errors) for the whole run

    @property
    def value(self):
        assert self.ok, (
            f"the KafkaJS step failed: {json.dumps(self.error, indent=1)}\n"
            f"KafkaJS's log:\n{self.log}"
        )
        return self.raw

    @property
    def members(self) -> list[Member]:
        """A consume step's consumers."""
        return [Member.from_report(m) for m in self.value["members"]]

    @property
    def groups(self) -> list[dict]:
        """A consume step's admin.describeGroups (``describe=True``), taken while its
        consumers were in their groups; member assignments decoded to {topic: [p]}."""
        return self.value["groups"]

    def error_names(self) -> list[str]:
        """The error's class name and those of its causes, outermost first."""
        assert not self.ok, f"the KafkaJS step succeeded: {self.raw!r}"
        names, error = [], self.error
        while error:
            names.append(error["name"])
            error = error.get("cause")
        return names


def kafkajs_client(bootstrap: str, **config) -> dict:
    """The scenario's client: KafkaJS's Kafka() config. ``ssl={"ca": path}`` reads the
    CA file; ``sasl={"mechanism": "scram-sha-256", "username": ..., "password": ...}``."""
    return {"brokers": bootstrap.split(","), **config}


def run_kafkajs(client: dict, steps: list[dict], timeout: float = RUN_TIMEOUT_S) -> list[Result]:
    """Run the steps in one node process; one Result per step."""
    node = shutil.which("node")
    if node is None or not (KAFKAJS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.fail(
            "KafkaJS is not installed: run scripts/install.sh (npm ci --prefix tests/kafkajs)",
            pytrace=False,
        )
    scenario = json.dumps({"client": client, "steps": steps})
    done = subprocess.run(
        [node, str(DRIVER)],
        input=scenario,
        # KafkaJS 2 warns of its new default partitioner; the tests name partitions
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (
        f"driver.js exited {done.returncode}:\n{done.stderr[-LOG_TAIL_CHARS:]}"
    )
    report = json.loads(done.stdout)
    log = done.stderr[-LOG_TAIL_CHARS:]
    return [Result(r["ok"], r.get("value"), r.get("error"), log) for r in report["results"]]


# Steps, as driver.js reads them.


def admin(method: str, *args) -> dict:
    """An admin call: ``admin("createTopics", {"topics": [...]})``."""
    return {"op": "admin", "method": method, "args": list(args)}


def produce(topic: str, messages: list[dict], acks: int = -1, **step) -> dict:
    return {"op": "produce", "topic": topic, "messages": messages, "acks": acks, **step}


def transaction(
    topic: str, transactional_id: str, batches: list[tuple[str, list[dict]] | tuple]
) -> dict:
    """One transactional producer; each batch ``(end, messages)`` or ``(end, messages,
    offsets)`` in a transaction of its own, with ``offsets`` (KafkaJS's sendOffsets
    argument: ``{"consumerGroupId": g, "topics": [...]}``) committed in it, ended by
    "commit" or "abort"."""
    return {
        "op": "transaction",
        "topic": topic,
        "producer": {"transactionalId": transactional_id},
        "batches": [
            {"end": b[0], "messages": b[1], **({"sendOffsets": b[2]} if len(b) > 2 else {})}
            for b in batches
        ],
    }


def consume(
    topics: list[str], count: int, consumers: list[dict], commit: bool = False, **step
) -> dict:
    """Consumers (KafkaJS consumer configs, each with its groupId) subscribed to the
    topics from the beginning, until they read ``count`` records between them and each
    has joined its group with an assignment no other member shares (or one crashes).
    ``commit=True`` commits what each read; ``describe=True`` describes the groups."""
    return {
        "op": "consume",
        "topics": topics,
        "count": count,
        "consumers": consumers,
        "commit": commit,
        **step,
    }


def topic_spec(name: str, partitions: int, replication: int = 1) -> dict:
    return {"topic": name, "numPartitions": partitions, "replicationFactor": replication}
