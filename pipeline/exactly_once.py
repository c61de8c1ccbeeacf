"""Exactly-once streaming writes without broker transactions: stage, intend, publish,
mark done.

Spark replays a micro-batch (same query id, same batch id, same source offsets) when a
query restarts after dying between its offset log and its commit log, and it retries
failed tasks within a batch. A sink that wrote straight from its tasks would write a
replayed batch twice, and a failed task attempt's partial output once more (Spark's own
Kafka sink is at-least-once for that reason). This sink:

1. Stage (executors, `write`): each task attempt writes its rows to the internal topic
   `__quill_sink_staging` with an idempotent producer, every record tagged with the
   attempt's stage id and its destination, and returns the offsets it staged as its
   commit message. Nothing reaches the destination topic yet; a failed attempt's
   staging is never referenced by anything.
2. Intend (driver, `commit(messages, batchId)`): read the query's last marker from the
   compacted topic `__quill_sink_commits` (key: the query id). Batch B marked done: a
   replay, skip it. Batch B marked intended: an earlier commit died mid-way, resume it.
   Otherwise write the intent (the staged ranges Spark chose, and the high watermarks
   of the destination partitions) and wait until all in-sync replicas have it. From
   then on batch B *is* those staged records, whatever a replay computes.
3. Publish: read the staged records back in the intent's order and number them 0..N-1
   (a pure function of the intent), and send each to its destination with the header
   `quill.batch: <query id>/<batch id>/<n>`. When resuming, first scan the destination
   partitions from the intent's high watermarks for this batch's headers and skip the
   numbers already there.
4. Mark done: flush (every record acknowledged by all in-sync replicas), then write
   the marker {"batch": B, "phase": "done"}. Spark then writes its commit log; if it
   dies before that, the replay meets step 2's skip.

Why nothing is written twice: the marker is checked before anything is published;
within one publish the idempotent producer never duplicates a retried send; across
attempts the numbering is the same (it depends only on the intent), and every record a
dead attempt got committed is below the high watermark, so the resume's scan sees it
and skips its number. Why nothing is lost: the intent is only written once every task's
staging was acknowledged, the staged records are immutable, and "done" is only written
after every publish was acknowledged; until then each restart resumes.

What it assumes, and what transactions will remove: one publisher per query at a time
(Spark commits one batch at a time; a publisher whose driver died stops at its next
check of its parent process); a dead attempt's record that the leader had appended but
not yet replicated must not become committed after the resume's scan (a follower still
inside replica.lag.time.max.ms could do that); and the staging topic must keep data
longer than a query stays down (7 days; longer outages fail the resume loudly). With
broker transactions, steps 3-4 become one transaction per batch under
transactional.id "quill-sink-<query id>": InitProducerId fences a zombie publisher,
the aborted attempt's records are never visible, and the done marker is written in
the same transaction. Staging, the intent and `Publisher` stay; the resume scan goes.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql.datasource import WriterCommitMessage

from pipeline.consumer import OffsetRange, RangeReader
from pipeline.offsets import OffsetReader, from_json, to_json
from pipeline.options import OptionError, SinkOptions, SourceOptions
from pipeline.producer import RecordProducer, sink_rows

log = logging.getLogger("pipeline.sink")

STAGING_TOPIC = "__quill_sink_staging"
COMMITS_TOPIC = "__quill_sink_commits"  # one partition: a total order of markers
STAGING_RETENTION_MS = 7 * 24 * 3600 * 1000
STAGE_HEADER = "quill.stage"  # staged records: "<stage id>|<topic>|<partition or empty>"
BATCH_HEADER = "quill.batch"  # published records: "<query id>/<batch id>/<number>"
MARKER_WINDOW = 256  # markers read per step when looking back for a query's last one
PARENT_CHECK_EVERY = 1024


@dataclass
class Staged(WriterCommitMessage):
    """What one task attempt staged: records [first, last] of one staging partition
    that carry its stage id."""

    stage_id: str
    partition: int
    first: int
    last: int
    count: int
    topics: list = field(default_factory=list)


# --------------------------------------------------------------------------- setup


def ensure_internal_topics(bootstrap: str, kafka: dict, staging_partitions: int) -> int:
    """Create the staging and commits topics if missing; returns the staging topic's
    partition count."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **_admin_settings(kafka)})
    md = admin.list_topics(timeout=30)
    replicas = max(1, min(3, len(md.brokers)))
    wanted = {
        STAGING_TOPIC: NewTopic(
            STAGING_TOPIC,
            staging_partitions,
            replicas,
            config={"cleanup.policy": "delete", "retention.ms": str(STAGING_RETENTION_MS)},
        ),
        COMMITS_TOPIC: NewTopic(COMMITS_TOPIC, 1, replicas, config={"cleanup.policy": "compact"}),
    }
    missing = [t for name, t in wanted.items() if name not in md.topics]
    if missing:
        for name, future in admin.create_topics(missing).items():
            try:
                future.result(timeout=60)
            except Exception as exc:  # a concurrent query may have created it first
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise RuntimeError(f"Cannot create the sink's topic {name}: {exc}") from None
    return _wait_for_leaders(admin, STAGING_TOPIC)


def _admin_settings(kafka: dict) -> dict:
    client_wide = ("security.", "sasl.", "ssl.", "client.id", "socket.")
    return {k: v for k, v in kafka.items() if k.startswith(client_wide)}


def _wait_for_leaders(admin, topic: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(timeout=30).topics.get(topic)
        if meta and meta.error is None and meta.partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return len(meta.partitions)
        if time.monotonic() > deadline:
            raise RuntimeError(f"The sink's topic {topic} has no leader after 30 s.")
        time.sleep(0.2)


def resolve_query_id(opts: SinkOptions) -> str:
    """The streaming query's id: the `queryId` option, else the id Spark keeps in the
    checkpoint's metadata file (the same across restarts from that checkpoint)."""
    if opts.query_id:
        return opts.query_id
    advice = (
        "pass .option('checkpointLocation', dir) to writeStream (or .option('queryId', id) "
        "that stays the same across restarts), or set deliveryGuarantee to 'at-least-once'."
    )
    if not opts.checkpoint:
        raise OptionError(f"The exactly-once quill sink must know the streaming query: {advice}")
    url = urlparse(opts.checkpoint)
    if url.scheme not in ("", "file"):
        raise OptionError(
            f"The checkpoint {opts.checkpoint} is not on a local file system, so the sink "
            "cannot read the query id from it: set .option('queryId', id) (the same on "
            "every restart)."
        )
    meta = Path(url.path if url.scheme else opts.checkpoint) / "metadata"
    try:
        return json.loads(meta.read_text())["id"]
    except (OSError, ValueError, KeyError) as exc:
        raise OptionError(f"Cannot read the query id from {meta} ({exc}); {advice}") from None


# --------------------------------------------------------------------------- reading


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


def _watermark(source: SourceOptions, topic: str, partition: int) -> int:
    offsets = OffsetReader(source)
    try:
        return offsets.latest([(topic, partition)])[(topic, partition)]
    finally:
        offsets.close()


class CommitLog:
    """The markers of exactly-once queries: key = query id, value = JSON."""

    def __init__(self, bootstrap: str, kafka: dict):
        self.bootstrap, self.kafka = bootstrap, kafka
        self.source = _internal_source(bootstrap, kafka)

    def latest(self, query_id: str) -> dict | None:
        """The query's last marker, looking back from the end in growing windows."""
        offsets = OffsetReader(self.source)
        try:
            tp = [(COMMITS_TOPIC, 0)]
            low, high = offsets.earliest(tp)[tp[0]], offsets.latest(tp)[tp[0]]
        finally:
            offsets.close()
        want = query_id.encode()
        window = MARKER_WINDOW
        while high > low:
            start = max(low, high - window)
            found = None
            for m in read_messages(self.source, COMMITS_TOPIC, 0, start, high):
                if m.key() == want and m.value() is not None:
                    found = m.value()
            if found is not None:
                return json.loads(found)
            high, window = start, window * 4
        return None

    def append(self, query_id: str, marker: dict, producer: RecordProducer | None = None) -> None:
        """Write a marker and wait until every in-sync replica has it."""
        producer = producer or RecordProducer(self.bootstrap, self.kafka)
        marker = {"query": query_id, "time": int(time.time() * 1000), **marker}
        producer.send(COMMITS_TOPIC, json.dumps(marker).encode(), query_id.encode(), 0)
        producer.flush()


# --------------------------------------------------------------------------- write path


def stage(batches, columns: dict, opts: SinkOptions, staging_partitions: int) -> Staged:
    """Executor: write one task's rows to the staging topic (step 1). Its records lie
    between the partition's high watermark before the first send and the one after
    the last acknowledgement, among other attempts' records (told apart by stage id)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition = (ctx.partitionId() if ctx is not None else 0) % staging_partitions
    stage_id = uuid.uuid4().hex
    source = _internal_source(opts.bootstrap, opts.kafka)
    first = _watermark(source, STAGING_TOPIC, partition)
    producer = RecordProducer(opts.bootstrap, opts.kafka)

    tags: dict[tuple, tuple] = {}  # (topic, partition) -> the stage header

    def staged_rows(batch):
        for topic, value, key, part, headers in sink_rows(batch, columns, opts.topic):
            tag = tags.get((topic, part))
            if tag is None:
                where = f"{stage_id}|{topic}|{'' if part is None else part}"
                tag = tags[(topic, part)] = (STAGE_HEADER, where.encode())
            yield STAGING_TOPIC, value, key, partition, [*headers, tag] if headers else [tag]

    for batch in batches:
        producer.send_all(staged_rows(batch))
    producer.flush()
    last = _watermark(source, STAGING_TOPIC, partition) - 1 if producer.sent else first - 1
    topics = sorted({topic for topic, _ in tags})
    return Staged(stage_id, partition, first, last, producer.sent, topics)


def commit_batch(opts: SinkOptions, query_id: str, batch_id: int, messages: list) -> str:
    """Driver: steps 2-4 for one micro-batch. Returns what it did, for the log."""
    commits = CommitLog(opts.bootstrap, opts.kafka)
    marker = commits.latest(query_id)
    if marker is not None:
        last, phase = int(marker["batch"]), marker["phase"]
        if batch_id < last:
            raise RuntimeError(
                f"The quill sink's commit log says query {query_id} is at batch {last}, but "
                f"Spark is committing batch {batch_id}: was the checkpoint replaced while the "
                "queryId stayed? Use a new queryId for a new checkpoint."
            )
        if batch_id == last and phase == "done":
            log.info("query %s batch %d was already written; skipping", query_id, batch_id)
            return "skipped"
        if phase == "intent":
            if batch_id > last:  # Spark went on without it (a lost commit log?): finish it
                log.warning("query %s batch %d was never finished; finishing it", query_id, last)
            _publish(opts, commits, query_id, marker, resuming=True)
            if batch_id == last:
                return "resumed"
    staged = [m for m in messages if isinstance(m, Staged) and m.count]
    if not staged:
        return "empty"
    producer = RecordProducer(opts.bootstrap, opts.kafka)  # one per commit: its start costs
    intent = _intent(opts, batch_id, staged)
    commits.append(query_id, intent, producer)
    _publish(opts, commits, query_id, intent, resuming=False, producer=producer)
    return "written"


def _publish(opts, commits, query_id, intent, resuming, producer=None) -> None:
    """Steps 3 and 4 for an intent."""
    producer = producer or RecordProducer(opts.bootstrap, opts.kafka)
    published = Publisher(opts, query_id, intent).run(resuming, producer)
    done = {"batch": intent["batch"], "phase": "done", "records": published}
    commits.append(query_id, done, producer)
    log.info("query %s batch %d: %d records written", query_id, intent["batch"], published)


def _intent(opts: SinkOptions, batch_id: int, staged: list[Staged]) -> dict:
    topics = sorted({t for m in staged for t in m.topics})
    offsets = OffsetReader(_internal_source(opts.bootstrap, opts.kafka))
    try:
        sizes = offsets.topic_sizes()
        tps = [(t, p) for t in topics for p in range(sizes.get(t, 0))]
        start = offsets.latest(tps)
    finally:
        offsets.close()
    return {
        "batch": batch_id,
        "phase": "intent",
        "staged": [[m.stage_id, m.partition, m.first, m.last, m.count] for m in staged],
        "topics": topics,
        "start": to_json(start),
    }


class Publisher:
    """Steps 3 (and the resume scan) for one intent."""

    def __init__(self, opts: SinkOptions, query_id: str, intent: dict):
        self.opts = opts
        self.intent = intent
        self.prefix = f"{query_id}/{intent['batch']}/"
        self.number = 0  # the next record's number
        self.source = _internal_source(opts.bootstrap, opts.kafka)

    def run(self, resuming: bool, producer: RecordProducer) -> int:
        """Publish what is not yet published; returns the batch's record count once
        every record is acknowledged."""
        present = self.published() if resuming else set()
        self.number = 0
        for entry in self.intent["staged"]:
            producer.send_all(self.rows(entry, present))
        producer.flush()
        if present:
            log.info("resumed %s: %d records were already written", self.prefix, len(present))
        return self.number

    def rows(self, entry: list, present: set[int]):
        """The sends for one staged range (stage id, partition, first, last, count):
        its records in offset order, numbered on from self.number, without those whose
        number is `present`."""
        stage_id, partition, first, last, count = entry
        mine, prefix, parent = f"{stage_id}|".encode(), self.prefix.encode(), os.getppid()
        number, found = self.number, 0
        tag, topic, part = None, None, None
        for m in read_messages(self.source, STAGING_TOPIC, partition, first, last + 1):
            headers = m.headers()
            if not headers or headers[-1][0] != STAGE_HEADER or not headers[-1][1].startswith(mine):
                continue  # another attempt's
            if number not in present:
                if headers[-1][1] != tag:  # the destination, parsed once per run of records
                    tag = headers[-1][1]
                    _, topic, where = tag.decode().split("|")
                    part = int(where) if where else None
                headers[-1] = (BATCH_HEADER, b"%s%d" % (prefix, number))
                yield topic, m.value(), m.key(), part, headers
            number += 1
            found += 1
            if number % PARENT_CHECK_EVERY == 0 and os.getppid() != parent:
                os._exit(70)  # our driver is gone: a restarted query will resume
        self.number = number
        if found != count:
            raise RuntimeError(
                f"Batch {self.intent['batch']}: {count} records were staged in "
                f"{STAGING_TOPIC}-{partition} [{first}, {last}] but {found} are left "
                "(staging retention passed?); the batch cannot be completed exactly once."
            )

    def published(self) -> set[int]:
        """Numbers of this batch already in the destination partitions."""
        start = from_json(self.intent["start"])
        offsets = OffsetReader(self.source)
        try:
            sizes = offsets.topic_sizes()
            tps = [(t, p) for t in self.intent["topics"] for p in range(sizes.get(t, 0))]
            ends = offsets.latest(tps)
            begins = offsets.earliest([tp for tp in tps if tp not in start])
        finally:
            offsets.close()
        begins.update(start)
        mine = self.prefix.encode()
        present: set[int] = set()
        # Whatever retention deleted meanwhile cannot be duplicated: skip it.
        scan = replace(self.source, fail_on_data_loss=False)
        for (topic, partition), end in ends.items():
            for m in read_messages(scan, topic, partition, begins[(topic, partition)], end):
                for name, value in m.headers() or ():
                    if name == BATCH_HEADER and value and value.startswith(mine):
                        present.add(int(value[len(mine) :]))
        return present
