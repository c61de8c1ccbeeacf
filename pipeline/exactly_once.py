"""Exactly-once streaming writes: every task writes its rows straight to the
destination in a Kafka transaction fenced per task, each record tagged with an id a
retry can compute again; markers in a compacted topic tell a task whether to look.

Spark re-runs work in two ways: it retries a failed task within a micro-batch
(spark.task.maxFailures), and it replays a whole micro-batch (same query id, batch id
and source offsets) when a query restarts after dying between its offset log and its
commit log. Either way each task partition is computed again from the same input, so
it gets the same multiset of rows (in the same order too, unless a shuffle came
before). A sink that just wrote them again would be at-least-once, as Spark's own
Kafka sink is. This one, for task P of batch B of query Q (Q and B from the local
properties Spark's MicroBatchExecution sets on every task, `sql.streaming.queryId` and
`streaming.sql.batchId`; the `queryId` option overrides Q):

1. Fence (task): a producer with transactional.id `quill-sink-Q-P` runs
   InitProducerId. The coordinator bumps the id's epoch, so no earlier attempt of this
   task, alive or not, can append or commit any more; a transaction one of them left
   open is aborted, one whose commit was under way is finished, before it answers.
2. Look: read Q's markers in the compacted topic `__quill_sink_commits` written since
   Q's last "done" marker (key: Q).
   - done(B): batch B was written in full before: write nothing (a replayed batch).
   - begin(B, P) (key `Q/B/P`): an earlier attempt of this task may have committed
     part of its rows: resume (4).
   - neither: write begin(B, P) (not in the transaction; acks=all).
3. Write: in one transaction, every row with the header `quill.eos: Q/B/P/<digest>[/<n>]`
   (pipeline.record_ids: the same ids for the same multiset of rows, whatever their
   order); commit before returning. An attempt that fails aborts.
4. Resume (after a failure): scan each destination topic's partitions, committed
   records only, from the first offset at or after begin(B, P)'s time minus
   SCAN_MARGIN_MS up to the high watermark (once the transactions other tasks had open
   below it have ended), collect the ids with this task's prefix `Q/B/P/`, and send
   only the rows whose id is not among them, in their order.
5. Done (driver, `commit(batchId)`, once every task succeeded): write done(B), then
   tombstones for the batch's begin markers, in that order from one idempotent
   producer (a tombstone is never in the log without the done marker before it), so
   the compacted topic keeps one marker per query plus the begins of the batch in
   flight.

Why both a transaction and ids. The transaction fences: after step 1 nothing of an
earlier attempt can still land, not even a request a killed process left in flight
(the window an idempotent producer alone leaves open), and what a failed attempt
wrote is aborted. The ids are still needed because a task may commit only part of
its rows and still be retried: when a Spark task fails upstream of the sink, the
Python writer's input just ends, the writer returns (and commits), and Spark then
fails the task and retries it with every row. Committing only in the driver, once
Spark has every task's message, would need the driver to finish the tasks'
transactions, which librdkafka cannot do for another process's producer.

Why nothing is written twice. A replayed batch: its tasks find done(B), which was
written only after every task of B had committed. A retried task, or a task of a
replayed batch that was not done: every earlier attempt wrote begin(B, P) before its
first record, so the retry sees it; after the fence every record of an earlier attempt
is committed or aborted for good, the committed ones carry a time after the begin's
and lie below the high watermark the scan reads to, so the retry finds their ids and
skips their rows. Why nothing is lost: a row is only skipped when its id was found
committed in the destination, and done(B) is only written once Spark has every task's
commit message, that is after every task's commit. Per key, order is kept: one
attempt's committed records in a partition are what it sent, in order, and a retry
sends the rest in row order.

Readers see each record once when they read committed records only (read_committed:
librdkafka's default and this source's; the Java client's default is
read_uncommitted, which also shows aborted attempts).

What it assumes:
- Clocks: an attempt's records carry its own clock's time (CreateTime), later than
  its begin marker's, unless that clock steps back by more than SCAN_MARGIN_MS or the
  topic uses LogAppendTime with a broker clock more than that behind the executor's.
- A replay computes the same rows. If it does not (the query, its input or a
  non-deterministic expression changed between a crash and the restart), the ids
  differ: rows of the dead attempt that the replay no longer computes stay written,
  rows it computes anew are added; rows of the same id are written once.
- Nothing deletes the attempt's records (retention, DeleteRecords) before its retry
  scans: deleted records are not seen and are written again.
- A scan waits for the transactions of the batch's other tasks on the same
  partitions to end (they run alongside, and commit or abort when they end); one a
  killed attempt left open ends when that task's retry fences it or after
  transaction.timeout.ms (5 minutes here, kafka.transaction.timeout.ms).
- Speculative execution (spark.speculation, off by default) is safe: the later
  attempt fences the earlier, which fails unless it committed first.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from dataclasses import dataclass, replace

from pyspark.sql.datasource import WriterCommitMessage

from pipeline.consumer import OffsetRange, RangeReader
from pipeline.offsets import OffsetReader
from pipeline.options import SinkOptions, SourceOptions
from pipeline.producer import (
    RecordProducer,
    SinkColumns,
    TransactionalProducer,
    shared_producer,
)
from pipeline.record_ids import RecordIds
from pipeline.worker import prepare_worker

log = logging.getLogger("pipeline.sink")

COMMITS_TOPIC = "__quill_sink_commits"  # one partition: a total order of markers
COMMITS_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(3600 * 1000),  # the cleaner only compacts closed segments
}
EOS_HEADER = "quill.eos"  # "<query id>/<batch id>/<partition id>/<digest>[/<n>]"
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
SCAN_MARGIN_MS = 60_000  # how far before its begin marker a resume looks
MARKER_WINDOW = 256  # markers read per step when looking back for a query's last done
STABLE_WAIT_S = 600.0  # longest wait for other tasks' open transactions before a scan


def transactional_id(query_id: str, partition_id: int) -> str:
    """One per (query, task partition): every attempt of a task fences the earlier ones."""
    return f"quill-sink-{query_id}-{partition_id}"


@dataclass
class TaskWritten(WriterCommitMessage):
    """One task's outcome: records it sent, rows it found already written."""

    query_id: str
    partition: int
    written: int
    skipped: int = 0


# --------------------------------------------------------------------------- setup


def ensure_commits_topic(bootstrap: str, kafka: dict) -> None:
    """Create the markers' topic if it is missing."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **_admin_settings(kafka)})
    md = admin.list_topics(timeout=30)
    if COMMITS_TOPIC not in md.topics:
        replicas = max(1, min(3, len(md.brokers)))
        topic = NewTopic(COMMITS_TOPIC, 1, replicas, config=COMMITS_CONFIG)
        try:
            admin.create_topics([topic])[COMMITS_TOPIC].result(timeout=60)
        except Exception as exc:  # a concurrent query may have created it first
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise RuntimeError(
                    f"Cannot create the sink's topic {COMMITS_TOPIC}: {exc}"
                ) from None
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(timeout=30).topics.get(COMMITS_TOPIC)
        if meta and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"The sink's topic {COMMITS_TOPIC} has no leader after 30 s.")
        time.sleep(0.2)


def _admin_settings(kafka: dict) -> dict:
    client_wide = ("security.", "sasl.", "ssl.", "client.id", "socket.")
    return {k: v for k, v in kafka.items() if k.startswith(client_wide)}


def _internal_source(bootstrap: str, kafka: dict) -> SourceOptions:
    return SourceOptions(
        bootstrap=bootstrap,
        strategy="assign",
        include_headers=True,
        poll_timeout_ms=60_000,
        kafka=dict(kafka),
    )


def read_messages(source: SourceOptions, topic: str, partition: int, start: int, end: int):
    """The librdkafka messages in [start, end) of one partition, in offset order."""
    for chunk in RangeReader(OffsetRange(topic, partition, start, end), source).chunks():
        yield from chunk


# --------------------------------------------------------------------------- markers


@dataclass
class Markers:
    """A query's last done marker, and its begin markers written after it that are
    not tombstoned (key -> marker)."""

    done: dict | None
    begins: dict


class CommitLog:
    """The markers of exactly-once queries. Key Q: done markers {"batch": B}; key
    Q/B/P: begin markers {"batch": B, "partition": P, "time": ms}."""

    def __init__(self, bootstrap: str, kafka: dict):
        self.source = _internal_source(bootstrap, kafka)

    def since_done(self, query_id: str) -> Markers:
        """Read back from the end, in growing windows, to the query's last done."""
        offsets = OffsetReader(self.source)
        try:
            tp = [(COMMITS_TOPIC, 0)]
            low, high = offsets.earliest(tp)[tp[0]], offsets.latest(tp)[tp[0]]
        finally:
            offsets.close()
        done_key, prefix = query_id.encode(), f"{query_id}/".encode()
        later: list = []  # the query's markers after its last done, oldest first
        window = MARKER_WINDOW
        while high > low:
            start = max(low, high - window)
            mine = [
                (m.key(), m.value())
                for m in read_messages(self.source, COMMITS_TOPIC, 0, start, high)
                if m.key() == done_key or (m.key() or b"").startswith(prefix)
            ]
            for i in range(len(mine) - 1, -1, -1):
                key, value = mine[i]
                if key == done_key and value is not None:
                    return Markers(json.loads(value), _begins(mine[i + 1 :] + later))
            later = mine + later
            high, window = start, window * 4
        return Markers(None, _begins(later))

    @staticmethod
    def write(markers: list[tuple[str, dict | None]], producer: RecordProducer) -> None:
        """Append markers in order (None: a tombstone) and wait until every in-sync
        replica has them."""
        now = int(time.time() * 1000)
        for key, marker in markers:
            value = None if marker is None else json.dumps({**marker, "time": now}).encode()
            producer.send(COMMITS_TOPIC, value, key.encode(), 0)
        producer.flush()


def _begins(markers: list) -> dict:
    found: dict = {}
    for key, value in markers:
        if value is None:
            found.pop(key.decode(), None)
        else:
            marker = json.loads(value)
            if marker.get("phase") == "begin":
                found[key.decode()] = marker
    return found


def _is_replay(done: dict | None, query_id: str, batch_id: int) -> bool:
    """Whether batch_id is done already; an earlier batch than the done one is an error."""
    if done is None or done["batch"] < batch_id:
        return False
    if done["batch"] > batch_id:
        raise RuntimeError(
            f"The quill sink's commit log says query {query_id} has written batch "
            f"{done['batch']}, but Spark is writing batch {batch_id}: was the checkpoint "
            "replaced while the queryId stayed? Use a new queryId for a new checkpoint."
        )
    return True


# --------------------------------------------------------------------------- tasks


def write_task(batches, columns: dict, opts: SinkOptions) -> TaskWritten:
    """Executor: steps 1-3 for the running Spark task."""
    from pyspark import TaskContext

    prepare_worker("pyarrow", "numpy", "pandas.util", "confluent_kafka")
    ctx = TaskContext.get()
    query_id = opts.query_id or (ctx and ctx.getLocalProperty(QUERY_ID_PROPERTY))
    batch_id = ctx and ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if not query_id or batch_id is None:
        raise RuntimeError(
            "The exactly-once quill sink found no streaming query id or batch id on its "
            "Spark task; it runs in micro-batch streaming queries (not continuous ones)."
        )
    return TaskWriter(opts, columns, query_id, int(batch_id), ctx.partitionId()).write(batches)


class TaskWriter:
    """One attempt of task `partition_id` of batch `batch_id`."""

    def __init__(
        self, opts: SinkOptions, columns: dict, query_id: str, batch_id: int, partition_id: int
    ):
        self.opts, self.columns = opts, columns
        self.query_id, self.batch_id, self.partition_id = query_id, batch_id, partition_id
        self.key = f"{query_id}/{batch_id}/{partition_id}"
        self.ids = RecordIds(self.key + "/")
        self.written = self.skipped = 0

    def write(self, batches) -> TaskWritten:
        batches = (b for b in batches if b.num_rows)
        first = next(batches, None)
        if first is None:  # nothing to write: no need to look
            return self._result()
        tid = transactional_id(self.query_id, self.partition_id)
        producer = TransactionalProducer(self.opts.bootstrap, self.opts.kafka, tid)  # fence
        begun = False
        try:
            commits = CommitLog(self.opts.bootstrap, self.opts.kafka)
            markers = commits.since_done(self.query_id)
            if _is_replay(markers.done, self.query_id, self.batch_id):
                self.skipped = first.num_rows + sum(b.num_rows for b in batches)
                log.info("%s: batch already written, %d rows skipped", self.key, self.skipped)
                return self._result()
            begin = markers.begins.get(self.key)
            if begin is None:
                marker = {"phase": "begin", "batch": self.batch_id, "partition": self.partition_id}
                commits.write(
                    [(self.key, marker)], shared_producer(self.opts.bootstrap, self.opts.kafka)
                )
                present = None
            else:
                present = Present(self, begin["time"] - SCAN_MARGIN_MS)
            producer.begin()
            begun = True
            for batch in itertools.chain([first], batches):
                self._send(batch, producer, present)
            producer.commit()
        except BaseException:
            if begun:
                producer.abort()
            raise
        finally:
            producer.close()
        if present is not None:
            log.info("%s resumed: %d rows were written before", self.key, self.skipped)
        return self._result()

    def _result(self) -> TaskWritten:
        return TaskWritten(self.query_id, self.partition_id, self.written, self.skipped)

    def _send(self, batch, producer: RecordProducer, present) -> None:
        cols = SinkColumns(batch, self.columns, self.opts.topic)
        ids = self.ids.for_batch(cols.for_hashing())
        # Generators, not lists: 10,000 live header lists a batch would keep the
        # garbage collector busy (it cost more than producing).
        if "headers" in self.columns:
            tags = ([*(hs or ()), (EOS_HEADER, i)] for hs, i in zip(cols.headers, ids, strict=True))
        else:
            tags = ([(EOS_HEADER, i)] for i in ids)
        rows = zip(cols.topics, cols.values, cols.keys, cols.partitions, tags, strict=True)
        if present is not None:
            rows = (row for row, i in zip(rows, ids, strict=True) if i not in present.ids(row[0]))
        sent = producer.send_all(rows)
        self.written += sent
        self.skipped += cols.n - sent


class Present:
    """The ids of this task's records already in the destination, per topic, read on
    first use (before this attempt has written to that topic)."""

    def __init__(self, task: TaskWriter, since_ms: int):
        self.task, self.since_ms = task, since_ms
        self.prefix = task.ids.prefix
        self.by_topic: dict[str, set] = {}

    def ids(self, topic: str) -> set:
        found = self.by_topic.get(topic)
        if found is None:
            found = self.by_topic[topic] = self._scan(topic)
        return found

    def _scan(self, topic: str) -> set:
        # Committed records only (what aborted attempts wrote is not there), up to the
        # high watermark: first wait until the transactions of other tasks that were
        # open below it have ended, so the last stable offset has reached it.
        # What retention deleted meanwhile cannot be duplicated: skip it.
        base = _internal_source(self.task.opts.bootstrap, self.task.opts.kafka)
        committed = replace(
            base,
            fail_on_data_loss=False,
            kafka={**base.kafka, "isolation.level": "read_committed"},
        )
        everything = replace(committed, kafka={**base.kafka, "isolation.level": "read_uncommitted"})
        offsets, stable = OffsetReader(everything), OffsetReader(committed)
        try:
            tps = [(topic, p) for p in range(offsets.topic_sizes().get(topic, 0))]
            starts = offsets.by_timestamp({tp: self.since_ms for tp in tps}, is_start=False)
            ends = offsets.latest(tps)
            _wait_stable(stable, ends)
        finally:
            offsets.close()
            stable.close()
        prefix, found = self.prefix, set()
        for (t, p), end in ends.items():
            for m in read_messages(committed, t, p, starts[(t, p)], end):
                for name, value in m.headers() or ():
                    if name == EOS_HEADER and value.startswith(prefix):
                        found.add(value)
        return found


def _wait_stable(stable: OffsetReader, ends: dict) -> None:
    """Wait until every partition's last stable offset has reached `ends`."""
    began, warned = time.monotonic(), False
    while True:
        lso = stable.latest(list(ends))
        behind = [f"{t}-{p}" for (t, p), end in ends.items() if lso[(t, p)] < end]
        if not behind:
            return
        waited = time.monotonic() - began
        if waited > STABLE_WAIT_S:
            raise TimeoutError(
                f"Transactions on {', '.join(behind)} stayed open for {STABLE_WAIT_S:.0f} s."
            )
        if waited > 5 and not warned:
            log.warning("waiting for open transactions on %s to end", ", ".join(behind))
            warned = True
        time.sleep(0.02)


# --------------------------------------------------------------------------- driver


def commit_batch(opts: SinkOptions, batch_id: int, messages: list) -> str:
    """Driver: step 4 for one micro-batch. Returns what it did, for the log."""
    mine = [m for m in messages if isinstance(m, TaskWritten) and (m.written or m.skipped)]
    queries = {m.query_id for m in mine}
    if not queries:
        return "empty"  # no task had a row: no begin marker, nothing to mark
    if len(queries) > 1:
        raise RuntimeError(f"Batch {batch_id}'s tasks name different queries: {sorted(queries)}")
    (query_id,) = queries
    commits = CommitLog(opts.bootstrap, opts.kafka)
    markers = commits.since_done(query_id)
    replay = _is_replay(markers.done, query_id, batch_id)
    written, skipped = sum(m.written for m in mine), sum(m.skipped for m in mine)
    done = {"phase": "done", "batch": batch_id, "records": written, "skipped": skipped}
    records = [] if replay else [(query_id, done)]
    records += [(key, None) for key, m in markers.begins.items() if m["batch"] <= batch_id]
    if records:
        commits.write(records, shared_producer(opts.bootstrap, opts.kafka))
    log.info(
        "query %s batch %d: %d records written, %d rows found written before",
        query_id,
        batch_id,
        written,
        skipped,
    )
    return "skipped" if replay else "written"
