"""The exactly-once streaming sink's claim, tested: a replayed micro-batch is not
written again, a publish that died half-way is finished without repeats, and a
streaming job killed with SIGKILL (mid-staging, mid-publish) and restarted writes every
record exactly once."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

pytest.register_assert_rewrite("tests.pipeline_helpers")

from pipeline import exactly_once as eo  # noqa: E402
from pipeline.options import parse_sink_options  # noqa: E402
from pipeline.producer import RecordProducer  # noqa: E402
from tests.pipeline_helpers import (  # noqa: E402
    consume_all,
    create_topic,
    latest_offsets,
    produce,
    topic_name,
)

COLUMNS = {"key": "key", "value": "value"}


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


def sink_options(bootstrap, topic, query_id):
    opts = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "queryId": query_id},
        streaming=True,
    )
    staging = eo.ensure_internal_topics(bootstrap, {}, opts.staging_partitions)
    return opts, staging


def arrow_rows(first: int, last: int) -> list:
    keys = [b"k%d" % (i % 5) for i in range(first, last)]
    values = [b"v%05d" % i for i in range(first, last)]
    return [pa.RecordBatch.from_arrays([pa.array(keys), pa.array(values)], ["key", "value"])]


def batch_tags(records, query_id):
    """(batch id, number) of each record written by the sink for `query_id`."""
    tags = []
    for r in records:
        tag = dict(r.headers)[eo.BATCH_HEADER].decode()
        qid, batch, number = tag.split("/")
        assert qid == query_id
        tags.append((int(batch), int(number)))
    return tags


def test_a_replayed_batch_is_skipped(bootstrap):
    topic = create_topic(bootstrap, topic_name("eo-replay"), 2)
    opts, staging = sink_options(bootstrap, topic, "q-replay")
    first = eo.stage(arrow_rows(0, 100), COLUMNS, opts, staging)
    assert eo.commit_batch(opts, "q-replay", 0, [first]) == "written"
    # Spark replays batch 0 (its commit log was not written): tasks stage again
    again = eo.stage(arrow_rows(0, 100), COLUMNS, opts, staging)
    assert eo.commit_batch(opts, "q-replay", 0, [again]) == "skipped"
    nxt = eo.stage(arrow_rows(100, 150), COLUMNS, opts, staging)
    assert eo.commit_batch(opts, "q-replay", 1, [nxt, None]) == "written"
    out = consume_all(bootstrap, topic)
    assert sorted(r.value for r in out) == [b"v%05d" % i for i in range(150)]
    assert sorted(batch_tags(out, "q-replay")) == [(0, n) for n in range(100)] + [
        (1, n) for n in range(50)
    ]
    with pytest.raises(RuntimeError, match="was the checkpoint replaced"):
        eo.commit_batch(opts, "q-replay", 0, [again])


def test_a_publish_that_died_half_way_is_finished_without_repeats(bootstrap):
    topic = create_topic(bootstrap, topic_name("eo-resume"), 3)
    query = "q-resume"
    opts, staging = sink_options(bootstrap, topic, query)
    staged = [
        eo.stage(arrow_rows(i * 400, (i + 1) * 400), COLUMNS, opts, staging) for i in range(3)
    ]
    # A driver wrote the intent and got 500 records out before it died.
    intent = eo._intent(opts, 7, staged)
    eo.CommitLog(bootstrap, {}).append(query, intent)
    publisher = eo.Publisher(opts, query, intent)
    dead = RecordProducer(bootstrap, {})
    sends = (row for entry in intent["staged"] for row in publisher.rows(entry, set()))
    dead.send_all(itertools.islice(sends, 500))
    dead.flush()
    assert sum(latest_offsets(bootstrap, topic).values()) == 500
    # The restarted query replays batch 7 with freshly staged (different) data.
    replayed = eo.stage(arrow_rows(5000, 5010), COLUMNS, opts, staging)
    assert eo.commit_batch(opts, query, 7, [replayed]) == "resumed"
    out = consume_all(bootstrap, topic)
    assert sorted(r.value for r in out) == [b"v%05d" % i for i in range(1200)]
    assert sorted(batch_tags(out, query)) == [(7, n) for n in range(1200)]
    assert eo.CommitLog(bootstrap, {}).latest(query)["phase"] == "done"
    assert eo.commit_batch(opts, query, 7, [replayed]) == "skipped"


def test_stage_ranges_ignore_other_attempts_interleaved(bootstrap):
    """Two task attempts staging into the same staging partition at once."""
    topic = create_topic(bootstrap, topic_name("eo-mixed"), 1)
    opts, staging = sink_options(bootstrap, topic, "q-mixed")
    a = eo.stage(arrow_rows(0, 50), COLUMNS, opts, staging)
    b = eo.stage(arrow_rows(50, 60), COLUMNS, opts, staging)  # a failed attempt's leftovers
    c = eo.stage(arrow_rows(60, 90), COLUMNS, opts, staging)
    assert a.partition == b.partition == c.partition
    assert eo.commit_batch(opts, "q-mixed", 0, [a, c]) == "written"
    values = [r.value for r in consume_all(bootstrap, topic)]
    assert values == [b"v%05d" % i for i in [*range(50), *range(60, 90)]]


# --------------------------------------------------------------------------- kill -9


def start_mirror(bootstrap, src, dst, checkpoint, log_path):
    cmd = [
        sys.executable,
        "-m",
        "pipeline.jobs.mirror",
        "--bootstrap-server",
        bootstrap,
        "--from",
        src,
        "--to",
        dst,
        "--checkpoint",
        str(checkpoint),
        "--master",
        "local[2]",
        "--shuffle-partitions",
        "2",
        "--max-offsets-per-trigger",
        "40000",
        "--available-now",
        "--conf",
        "spark.ui.enabled=false",
    ]
    log = open(log_path, "ab")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log = log
    return proc


def kill_when(proc, condition, timeout=180) -> bool:
    """SIGKILL the job's whole process group (driver, JVM, Python workers) as soon as
    `condition()` holds; False if the job ended first."""
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                return False
            if condition():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.005)
        raise AssertionError("the condition to kill the job never came")
    finally:
        proc.log.close()


@pytest.mark.spark
@pytest.mark.slow
def test_kill_9_mid_batch_and_restart_writes_each_record_once(bootstrap, tmp_path):
    src = create_topic(bootstrap, topic_name("kill-src"), 3)
    dst = create_topic(bootstrap, topic_name("kill-dst"), 3)
    n = 80_000
    produce(
        bootstrap,
        src,
        [{"key": b"k%d" % (i % 40), "value": b"r%07d" % i + b"." * 60} for i in range(n)],
    )
    checkpoint, log = tmp_path / "ck", tmp_path / "mirror.log"

    watch = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill-test"})

    def end_of(topic: str, partitions: int) -> int:
        return sum(
            watch.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        )

    def published() -> int:
        return end_of(dst, 3)

    staging_partitions = eo.ensure_internal_topics(bootstrap, {}, 8)

    def staged() -> int:
        return end_of(eo.STAGING_TOPIC, staging_partitions)

    def marker():
        query_id = json.loads((checkpoint / "metadata").read_text())["id"]
        return eo.CommitLog(bootstrap, {}).latest(query_id)

    # 1: killed while the driver publishes batch 0 (40,000 records)
    job = start_mirror(bootstrap, src, dst, checkpoint, log)
    assert kill_when(job, lambda: published() > 0), log.read_text()[-3000:]
    after_first = published()
    assert 0 < after_first < 40_000, after_first
    assert marker()["batch"] == 0 and marker()["phase"] == "intent"

    # 2: killed while the replayed batch 0's tasks stage again
    staged_before = staged()
    job = start_mirror(bootstrap, src, dst, checkpoint, log)
    assert kill_when(job, lambda: staged() > staged_before), log.read_text()[-3000:]

    # 3: runs to the end
    job = start_mirror(bootstrap, src, dst, checkpoint, log)
    assert job.wait(300) == 0, log.read_text()[-3000:]
    job.log.close()
    assert marker()["phase"] == "done"

    out = consume_all(bootstrap, dst)
    values = [r.value[:8] for r in out]
    assert len(values) == n, (
        f"{len(values)} records for {n}: {len(values) - len(set(values))} repeats"
    )
    assert sorted(values) == [b"r%07d" % i for i in range(n)]
    by_key = defaultdict(list)
    for r in out:  # (partition, offset) order
        by_key[r.key].append(r.value)
    assert all(v == sorted(v) for v in by_key.values()), "per-key order was not kept"
    assert {b for b, _ in batch_tags(out, marker()["query"])} == {0, 1}
    watch.close()
