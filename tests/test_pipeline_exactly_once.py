"""The exactly-once streaming sink's claim, tested: a replayed micro-batch writes
nothing, a task retried after writing part of its rows (in another order) writes only
the rest, and streaming jobs killed with SIGKILL mid-batch (with and without a shuffle
before the sink) and restarted write every record exactly once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict

import pandas as pd
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

pytest.register_assert_rewrite("tests.pipeline_helpers")

from pipeline import exactly_once as eo  # noqa: E402
from pipeline.options import parse_sink_options  # noqa: E402
from pipeline.producer import SinkColumns, close_shared  # noqa: E402
from pipeline.record_ids import RecordIds  # noqa: E402
from pipeline.spark_daemon import prefer_installed_pyspark  # noqa: E402
from tests.pipeline_helpers import (  # noqa: E402
    consume_all,
    create_topic,
    latest_offsets,
    produce,
    spark_site_env,
    start_copy,
    topic_name,
)

pytest_plugins = ["tests.pipeline_helpers"]  # the shared `spark` fixture

COLUMNS = {"key": "key", "value": "value"}


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    cluster = cluster_factory(1).bootstrap
    eo.ensure_commits_topic(cluster, {})
    yield cluster
    close_shared()  # the tasks run in this process here, and share its producer


def sink_options(bootstrap, topic, query_id=None):
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
    if query_id:
        options["queryId"] = query_id
    return parse_sink_options(options, streaming=True)


def rows(numbers, size=None) -> list:
    """Arrow batches of key/value rows `numbers` (values v<n>, keys k<n % 5>)."""
    numbers = list(numbers)
    size = size or max(1, len(numbers))
    out = []
    for i in range(0, len(numbers), size):
        part = numbers[i : i + size]
        keys = pa.array([b"k%d" % (n % 5) for n in part], pa.binary())
        values = pa.array([b"v%05d" % n for n in part], pa.binary())
        out.append(pa.RecordBatch.from_arrays([keys, values], ["key", "value"]))
    return out


def task(opts, query, batch, partition):
    return eo.TaskWriter(opts, COLUMNS, query, batch, partition)


def in_log(bootstrap, topic) -> int:
    """Offsets used in the topic: committed, aborted and open records, and markers (the
    high watermarks, which a read_uncommitted client is told)."""
    return sum(latest_offsets(bootstrap, topic, "read_uncommitted").values())


def wait_for_records(bootstrap, topic) -> None:
    deadline = time.time() + 30
    while in_log(bootstrap, topic) == 0:
        assert time.time() < deadline, "nothing was written"
        time.sleep(0.01)


def failing(batches, after_rows, bootstrap, topic):
    """The batches, then (once `after_rows` rows were handed out and the topic holds
    some of them) a failure."""
    handed = 0
    for b in batches:
        yield b
        handed += b.num_rows
        if handed >= after_rows:
            wait_for_records(bootstrap, topic)
            raise RuntimeError("the task's input failed")


def cut_short(batches, after_rows):
    """The batches up to `after_rows` rows, then a plain end: what a Spark task's writer
    sees when the task fails upstream of it (the input stream just ends, and Spark fails
    the task once the writer has returned)."""
    handed = 0
    for b in batches:
        if handed >= after_rows:
            return
        yield b
        handed += b.num_rows


def tags(records) -> list[str]:
    return [dict(r.headers)[eo.EOS_HEADER].decode() for r in records]


def test_a_replayed_batch_writes_nothing(bootstrap):
    topic = create_topic(bootstrap, topic_name("eo-replay"), 2)
    query = f"q-{uuid.uuid4().hex[:8]}"
    opts = sink_options(bootstrap, topic)
    first = [task(opts, query, 0, 0).write(rows(range(100))), task(opts, query, 0, 1).write([])]
    assert first[0].written == 100 and first[1].written == 0
    assert eo.commit_batch(opts, 0, first) == "written"
    # Spark replays batch 0 (its commit log was not written): the tasks run again
    again = task(opts, query, 0, 0).write(rows(range(100)))
    assert (again.written, again.skipped) == (0, 100)
    assert eo.commit_batch(opts, 0, [again]) == "skipped"
    nxt = task(opts, query, 1, 0).write(rows(range(100, 150)))
    assert eo.commit_batch(opts, 1, [nxt, None]) == "written"
    out = consume_all(bootstrap, topic)
    assert sorted(r.value for r in out) == [b"v%05d" % i for i in range(150)]
    assert len(set(tags(out))) == 150
    assert Counter(t.split("/")[1] for t in tags(out)) == {"0": 100, "1": 50}
    # the compacted topic keeps the last done marker, and no begin marker once done
    markers = eo.CommitLog(bootstrap, {}).since_done(query)
    assert markers.done["batch"] == 1 and markers.done["records"] == 50
    assert markers.begins == {}
    with pytest.raises(RuntimeError, match="was the checkpoint replaced"):
        task(opts, query, 0, 0).write(rows(range(100)))
    with pytest.raises(RuntimeError, match="was the checkpoint replaced"):
        eo.commit_batch(opts, 0, [again])


def test_a_task_whose_input_was_cut_short_is_completed_by_its_retry(bootstrap):
    """Attempt 0 committed part of its rows (its input ended early, as when the task
    fails upstream of the sink); the retry gets the same rows in another order and
    other batches (as after a shuffle), some of them identical, and writes only the
    rest: each row as often as it occurs."""
    topic = create_topic(bootstrap, topic_name("eo-resume"), 3)
    query = f"q-{uuid.uuid4().hex[:8]}"
    opts = sink_options(bootstrap, topic)
    numbers = [*range(1200), *range(0, 1200, 40)]  # 30 rows twice
    first = task(opts, query, 7, 2).write(cut_short(rows(numbers, 100), 600))
    assert first.written == 600
    assert f"{query}/7/2" in eo.CommitLog(bootstrap, {}).since_done(query).begins
    shuffled = random.Random(7).sample(numbers, len(numbers))
    retry = task(opts, query, 7, 2).write(rows(shuffled, 333))
    assert (retry.written, retry.skipped) == (len(numbers) - 600, 600)
    assert eo.commit_batch(opts, 7, [retry]) == "written"
    out = consume_all(bootstrap, topic)
    assert Counter(r.value for r in out) == Counter(b"v%05d" % n for n in numbers)
    assert len(set(tags(out))) == len(numbers)
    assert eo.CommitLog(bootstrap, {}).since_done(query).done["skipped"] == 600


def test_a_failed_attempt_is_aborted_and_its_retry_writes_every_row(bootstrap):
    topic = create_topic(bootstrap, topic_name("eo-abort"), 3)
    query = f"q-{uuid.uuid4().hex[:8]}"
    opts = sink_options(bootstrap, topic)
    with pytest.raises(RuntimeError, match="input failed"):
        task(opts, query, 2, 0).write(failing(rows(range(900), 100), 500, bootstrap, topic))
    aborted = in_log(bootstrap, topic)
    assert aborted > 0  # the attempt's records are in the log, aborted
    assert consume_all(bootstrap, topic) == []
    retry = task(opts, query, 2, 0).write(rows(range(900), 250))
    assert (retry.written, retry.skipped) == (900, 0)
    out = consume_all(bootstrap, topic)
    assert Counter(r.value for r in out) == Counter(b"v%05d" % n for n in range(900))
    assert in_log(bootstrap, topic) > aborted + 900


def test_an_attempt_still_running_when_its_retry_starts_is_fenced(bootstrap):
    """The window no idempotent producer closes: attempt 0 (its executor lost, say)
    still sends after attempt 1 began. Attempt 1's InitProducerId aborts attempt 0's
    transaction and fences it: nothing attempt 0 sends later becomes visible."""
    topic = create_topic(bootstrap, topic_name("eo-zombie"), 2)
    query = f"q-{uuid.uuid4().hex[:8]}"
    opts = sink_options(bootstrap, topic)
    release, outcome = threading.Event(), {}

    def stalled():
        yield from rows(range(0, 300), 100)
        release.wait(60)
        yield from rows(range(300, 600), 100)

    def attempt_0():
        try:
            outcome["result"] = task(opts, query, 3, 0).write(stalled())
        except Exception as exc:  # noqa: BLE001 - the outcome is asserted below
            outcome["error"] = exc

    zombie = threading.Thread(target=attempt_0)
    zombie.start()
    wait_for_records(bootstrap, topic)
    retry = task(opts, query, 3, 0).write(rows(range(600), 250))
    assert (retry.written, retry.skipped) == (600, 0)
    release.set()
    zombie.join(120)
    assert not zombie.is_alive()
    assert "result" not in outcome, "the fenced attempt committed"
    assert "fenced" in str(outcome["error"]).lower() or "epoch" in str(outcome["error"]).lower()
    assert eo.commit_batch(opts, 3, [retry]) == "written"
    out = consume_all(bootstrap, topic)
    assert Counter(r.value for r in out) == Counter(b"v%05d" % n for n in range(600))


def test_identical_rows_of_other_tasks_and_queries_are_not_taken_for_this_tasks(bootstrap):
    topic = create_topic(bootstrap, topic_name("eo-mixed"), 1)
    query, other = f"q-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex[:8]}"
    opts = sink_options(bootstrap, topic)
    assert task(opts, query, 0, 0).write(cut_short(rows(range(300), 50), 100)).written == 100
    # the same rows from another task of the batch and from another query
    assert task(opts, query, 0, 1).write(rows(range(300))).written == 300
    assert task(opts, other, 0, 0).write(rows(range(300))).written == 300
    retry = task(opts, query, 0, 0).write(rows(range(300)))
    assert (retry.written, retry.skipped) == (200, 100)
    values = Counter(r.value for r in consume_all(bootstrap, topic))
    assert values == Counter({b"v%05d" % n: 3 for n in range(300)})


def test_ids_depend_on_the_rows_not_on_their_order_or_batches():
    def ids(batches, columns):
        record_ids = RecordIds("q/0/0/")
        out = []
        for b in batches:
            out += record_ids.for_batch(SinkColumns(b, columns, None).for_hashing())
        return out

    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = pa.table(
        {
            "topic": ["a", "a", "b", "a", "a", "a", "a", "a"],
            "partition": pa.array([None, 0, 0, None, None, None, None, 1], pa.int32()),
            "key": [b"k", b"k", b"k", None, b"", b"v", b"k", b"k"],
            "value": [b"v", b"v", b"v", b"v", b"v", b"k", b"v", b"v"],
            "headers": pa.array(
                [None, None, None, None, None, None, [{"key": "h", "value": None}], None],
                headers,
            ),
        }
    )
    columns = {name: name for name in table.column_names}
    mine = ids(table.to_batches(max_chunksize=3), columns)
    # every row differs in one column (key and value swapped, null vs empty key, ...)
    assert len(set(mine)) == len(mine) == 8
    assert all(i.startswith(b"q/0/0/") and len(i) == 6 + 16 for i in mine)
    order = [7, 3, 0, 5, 1, 6, 2, 4]
    again = ids(table.take(order).to_batches(max_chunksize=5), columns)
    assert again == [mine[i] for i in order]
    # identical rows: numbered, whichever comes first
    twice = pa.concat_tables([table, table.take([0, 0])])
    numbered = ids(twice.to_batches(), columns)
    assert numbered[:8] == mine
    assert numbered[8:] == [mine[0] + b"/1", mine[0] + b"/2"]


# --------------------------------------------------------------------------- in Spark


@pytest.mark.spark
def test_a_task_that_fails_mid_write_is_retried_without_repeats(spark, bootstrap, tmp_path):
    """Attempt 0 of one task fails once the destination holds some of its records
    (the shared session retries tasks: local[2,2]); the retry writes the rest."""
    from pyspark.sql.functions import col, pandas_udf

    src = create_topic(bootstrap, topic_name("fail-src"), 1)  # one task: it alone writes
    dst = create_topic(bootstrap, topic_name("fail-dst"), 2)
    n = 50_000  # five Arrow batches of 10,000 rows
    produce(bootstrap, src, [{"key": b"k%d" % (i % 9), "value": b"r%06d" % i} for i in range(n)])

    @pandas_udf("binary")
    def fail_once(values: pd.Series) -> pd.Series:
        """Attempt 0 of task 0: passes three batches (the sink's input lags the UDF's
        by a batch or two), then waits until the sink has written records and fails."""
        from confluent_kafka import Consumer as Watcher
        from confluent_kafka import TopicPartition as TP
        from pyspark import TaskContext

        ctx = TaskContext.get()
        calls = f"QUILL_TEST_CALLS_{ctx.stageId()}_{ctx.partitionId()}_{ctx.attemptNumber()}"
        os.environ[calls] = str(int(os.environ.get(calls, "0")) + 1)
        if ctx.attemptNumber() == 0 and ctx.partitionId() == 0 and os.environ[calls] == "4":
            watcher = Watcher(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "fail-test",
                    "isolation.level": "read_uncommitted",  # see the open transaction
                }
            )
            deadline = time.time() + 60
            while time.time() < deadline:
                ends = [watcher.get_watermark_offsets(TP(dst, p), 10, False)[1] for p in (0, 1)]
                if sum(ends):
                    break
                time.sleep(0.05)
            watcher.close()
            raise RuntimeError("a task attempt fails mid-write")
        return values

    columns = ("key", fail_once(col("value")).alias("value"))
    query = start_copy(spark, bootstrap, src, dst, tmp_path / "ck", columns)
    try:
        query.processAllAvailable()
        query_id = query.id
    finally:
        query.stop()
    out = consume_all(bootstrap, dst)
    assert sorted(r.value for r in out) == [b"r%06d" % i for i in range(n)]
    done = eo.CommitLog(bootstrap, {}).since_done(query_id).done
    assert done["batch"] == 0 and done["skipped"] > 0  # the retry found what attempt 0 wrote
    assert done["records"] + done["skipped"] == n


# --------------------------------------------------------------------------- kill -9


# The kill tests' source: two micro-batches (the job reads at most KILL_BATCH offsets per
# trigger), so a run killed in batch 0 and a replay that ends in batch 1 are both seen.
# 40,000 records (was 80,000): each task still writes thousands of records per batch, far
# more than are in flight when the kill lands, at half the suite time.
KILL_RECORDS = 40_000
KILL_BATCH = KILL_RECORDS // 2
# Each case starts a job three times, and a start is mostly JVM and Python start-up:
# the driver's JVM with the client compiler only and one GC thread (as tests/conftest.py
# runs ZooKeeper's), the tasks' Python workers importing pyspark from its cached
# bytecode (pipeline.spark_daemon) rather than compiling Spark's pyspark.zip again, and
# Spark's data source planning workers the same (tests/spark_site/sitecustomize.py).
FAST_START = (
    "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.python.daemon.module=pipeline.spark_daemon",
)


def test_the_spark_daemon_puts_sparks_zips_last():
    path = ["/x/pyspark/python/lib/pyspark.zip", "/w", "/x/py4j-0.10.9.9-src.zip", "/site"]
    assert prefer_installed_pyspark(path) == [
        "/w",
        "/site",
        "/x/pyspark/python/lib/pyspark.zip",
        "/x/py4j-0.10.9.9-src.zip",
    ]


def start_job(module, bootstrap, src, dst, checkpoint, log_path):
    cmd = [
        sys.executable,
        "-m",
        module,
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
        str(KILL_BATCH),
        "--available-now",
        "--conf",
        "spark.ui.enabled=false",
        *(arg for conf in FAST_START for arg in ("--conf", conf)),
    ]
    log = open(log_path, "ab")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=spark_site_env()
    )
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
@pytest.mark.parametrize(
    "module",
    ["pipeline.jobs.mirror", "tests.pipeline_helpers"],  # the latter shuffles by key first
    ids=["mirror", "shuffled"],
)
def test_kill_9_mid_batch_and_restart_writes_each_record_once(bootstrap, tmp_path, module):
    src = create_topic(bootstrap, topic_name("kill-src"), 3)
    dst = create_topic(bootstrap, topic_name("kill-dst"), 3)
    n = KILL_RECORDS
    produce(
        bootstrap,
        src,
        [{"key": b"k%d" % (i % 40), "value": b"r%07d" % i + b"." * 60} for i in range(n)],
    )
    watch = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kill-test",
            "isolation.level": "read_uncommitted",  # the high watermark, not the LSO
        }
    )
    try:
        kill_and_restart(module, bootstrap, src, dst, n, tmp_path, watch)
    finally:
        watch.close()


def kill_and_restart(module, bootstrap, src, dst, n, tmp_path, watch):
    """Kill the job mid-batch, again while its replay writes, then let it finish."""
    checkpoint, log = tmp_path / "ck", tmp_path / "job.log"

    def published() -> int:
        return sum(
            watch.get_watermark_offsets(TopicPartition(dst, p), timeout=10, cached=False)[1]
            for p in range(3)
        )

    def markers():
        query_id = json.loads((checkpoint / "metadata").read_text())["id"]
        return query_id, eo.CommitLog(bootstrap, {}).since_done(query_id)

    # 1: killed while the tasks of batch 0 (KILL_BATCH records) write
    job = start_job(module, bootstrap, src, dst, checkpoint, log)
    assert kill_when(job, lambda: published() > 0), log.read_text()[-3000:]
    time.sleep(1)  # what the dead tasks had in flight has landed by now
    after_first = published()
    assert after_first > 0  # records of batch 0, committed, aborted or open
    query_id, found = markers()
    assert found.done is None and found.begins
    assert {m["batch"] for m in found.begins.values()} == {0}

    # 2: killed while the tasks of the replayed batch 0 write the rest
    job = start_job(module, bootstrap, src, dst, checkpoint, log)
    assert kill_when(job, lambda: published() > after_first), log.read_text()[-3000:]

    # 3: runs to the end
    job = start_job(module, bootstrap, src, dst, checkpoint, log)
    assert job.wait(300) == 0, log.read_text()[-3000:]
    job.log.close()
    _, found = markers()
    assert found.done["batch"] == 1 and found.begins == {}

    out = consume_all(bootstrap, dst)
    values = [r.value[:8] for r in out]
    assert len(values) == n, (
        f"{len(values)} records for {n}: {len(values) - len(set(values))} repeats"
    )
    assert sorted(values) == [b"r%07d" % i for i in range(n)]
    assert {t.split("/")[0] for t in tags(out)} == {query_id}
    assert {t.split("/")[1] for t in tags(out)} == {"0", "1"}
    if module == "pipeline.jobs.mirror":  # no shuffle: the rows' order is the source's
        by_key = defaultdict(list)
        for r in out:  # (partition, offset) order
            by_key[r.key].append(r.value)
        assert all(v == sorted(v) for v in by_key.values()), "per-key order was not kept"
