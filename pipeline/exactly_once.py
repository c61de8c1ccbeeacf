"""Exactly-once streaming writes without broker transactions: every task writes its
rows once, straight to the destination, each record tagged with an id a retry can
compute again; markers in a compacted topic tell a task whether to look first.

Spark re-runs work in two ways: it retries a failed task within a micro-batch
(spark.task.maxFailures), and it replays a whole micro-batch (same query id, batch id
and source offsets) when a query restarts after dying between its offset log and its
commit log. Either way each task partition is computed again from the same input, so
it gets the same multiset of rows (in the same order too, unless a shuffle came
before). A sink that just wrote them again would be at-least-once, as Spark's own
Kafka sink is. This one, for task P of batch B of query Q (Q and B from the local
properties Spark's MicroBatchExecution sets on every task, `sql.streaming.queryId` and
`streaming.sql.batchId`; the `queryId` option overrides Q):

1. Look (task, before its first record): read Q's markers in the compacted topic
   `__quill_sink_commits` written since Q's last "done" marker (key: Q).
   - done(B): batch B was written in full before: write nothing (a replayed batch).
   - begin(B, P) (key `Q/B/P`): an earlier attempt of this task may have written part
     of its rows: resume (3).
   - neither: write begin(B, P) and wait until every in-sync replica has it.
2. Write (task): every row with the header `quill.eos: Q/B/P/<digest>[/<n>]`
   (pipeline.record_ids: the same ids for the same multiset of rows, whatever their
   order), from an idempotent producer with acks=all; flush before returning, so every
   record is acknowledged before Spark counts the task as done.
3. Resume (task, after a failure): scan each destination topic's partitions from the
   first offset at or after begin(B, P)'s time minus SCAN_MARGIN_MS up to the high
   watermark, collect the ids with this task's prefix `Q/B/P/`, and send only the rows
   whose id is not among them, in their order.
4. Done (driver, `commit(batchId)`, once every task succeeded): write done(B), then
   tombstones for the batch's begin markers, in that order from one idempotent
   producer (a tombstone is never in the log without the done marker before it), so
   the compacted topic keeps one marker per query plus the begins of the batch in
   flight.

Why nothing is written twice. A replayed batch: its tasks find done(B), which was
written only after every task of B had flushed. A retried task, or a task of a
replayed batch that was not done: every earlier attempt wrote begin(B, P) before its
first record and waited for it, so the retry sees it; every record such an attempt
got committed carries a time after the begin's and lies below the high watermark the
retry reads up to, so the retry finds its id and skips its row. Within an attempt the
idempotent producer never duplicates a retried send. Why nothing is lost: a row is
only skipped when its id was found committed in the destination, and done(B) is only
written once Spark has every task's commit message, that is after every task's
flush. Per key, order is kept: an attempt's records in a partition are a prefix of
what it sent (idempotence allows no gaps), and a retry sends the rest in row order.

What it assumes; broker transactions would remove the first two:
- One live attempt per task at a time: no speculative execution (spark.speculation
  is false by default) and no attempt still writing while its retry scans. A failed
  attempt drops what its producer still queues and waits for its in-flight requests
  before the task fails. An attempt whose process dies (SIGKILL, a lost executor) can
  leave a request the broker has received but not yet appended, or appended but not
  yet replicated to every in-sync replica; if such a record becomes committed after
  the retry's scan, it is written twice. The window is the broker's request latency,
  short next to Spark's time to notice a failure and start the task again; only a
  producer fenced by a transactional epoch closes it.
- Clocks: an attempt's records carry its own clock's time (CreateTime), later than
  its begin marker's, unless that clock steps back by more than SCAN_MARGIN_MS or the
  topic uses LogAppendTime with a broker clock more than that behind the executor's.
- A replay computes the same rows. If it does not (the query, its input or a
  non-deterministic expression changed between a crash and the restart), the ids
  differ: rows of the dead attempt that the replay no longer computes stay written,
  rows it computes anew are added; rows of the same id are written once.
- Nothing deletes the attempt's records (retention, DeleteRecords) before its retry
  scans: deleted records are not seen and are written again.

With broker transactions each task attempt would write its records and a done(B, P)
marker in one transaction under a transactional.id per (Q, P): InitProducerId fences
and aborts a dead attempt, so a retry either finds done(B, P) and writes nothing or
sees nothing of earlier attempts and writes everything. The ids, the scan and the
begin markers would go; done(B) would stay for replays.
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
from pipeline.producer import RecordProducer, SinkColumns, shared_producer
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
        commits = CommitLog(self.opts.bootstrap, self.opts.kafka)
        markers = commits.since_done(self.query_id)
        if _is_replay(markers.done, self.query_id, self.batch_id):
            self.skipped = first.num_rows + sum(b.num_rows for b in batches)
            log.info("%s: batch already written, %d rows skipped", self.key, self.skipped)
            return self._result()
        begin = markers.begins.get(self.key)
        producer = shared_producer(self.opts.bootstrap, self.opts.kafka)
        try:
            if begin is None:
                marker = {"phase": "begin", "batch": self.batch_id, "partition": self.partition_id}
                commits.write([(self.key, marker)], producer)
                present = None
            else:
                present = Present(self, begin["time"] - SCAN_MARGIN_MS)
            for batch in itertools.chain([first], batches):
                self._send(batch, producer, present)
            producer.flush()
        except BaseException:
            producer.abandon()
            raise
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
        # What retention deleted meanwhile cannot be duplicated: skip it.
        source = replace(
            _internal_source(self.task.opts.bootstrap, self.task.opts.kafka),
            fail_on_data_loss=False,
        )
        offsets = OffsetReader(source)
        try:
            tps = [(topic, p) for p in range(offsets.topic_sizes().get(topic, 0))]
            starts = offsets.by_timestamp({tp: self.since_ms for tp in tps}, is_start=False)
            ends = offsets.latest(tps)
        finally:
            offsets.close()
        prefix, found = self.prefix, set()
        for (t, p), end in ends.items():
            for m in read_messages(source, t, p, starts[(t, p)], end):
                for name, value in m.headers() or ():
                    if name == EOS_HEADER and value.startswith(prefix):
                        found.add(value)
        return found


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
