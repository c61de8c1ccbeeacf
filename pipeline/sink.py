"""The `quill` sink: DataFrame rows -> records, batch and streaming.

Columns, as Spark's Kafka sink: `value` (required, binary or string), `key`, `topic`
(or the `topic` option, which wins), `partition` (else murmur2 of the key, or random
without one), `headers` (array<struct<key:string,value:binary>>). Other columns are
ignored.

- Batch writes (`df.write`) and streaming writes with deliveryGuarantee=at-least-once
  produce straight from the tasks with idempotent producers: a retried send is never
  duplicated, but a failed and retried task or batch is written again (Spark's own
  Kafka sink behaves the same).
- Streaming writes are exactly-once by default: see `pipeline.exactly_once`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from pipeline import exactly_once
from pipeline.options import OptionError, SinkOptions, parse_sink_options
from pipeline.producer import shared_producer, sink_rows
from pipeline.schema import check_sink_schema
from pipeline.worker import prepare_worker


class Written(WriterCommitMessage):
    def __init__(self, count: int):
        self.count = count


def write_direct(batches, columns: dict, opts: SinkOptions) -> Written:
    prepare_worker("pyarrow", "numpy", "confluent_kafka")
    producer = shared_producer(opts.bootstrap, opts.kafka)
    try:
        for batch in batches:
            producer.send_all(sink_rows(batch, columns, opts.topic))
        return Written(producer.flush())
    except BaseException:
        producer.abandon()
        raise


def _columns(schema: StructType, opts: SinkOptions) -> dict[str, str]:
    present = check_sink_schema(schema, opts.topic)
    actual = {f.name.lower(): f.name for f in schema.fields}
    return {name: actual[name] for name in present}


class QuillWriter(DataSourceArrowWriter):
    """df.write.format("quill"): at-least-once, straight from the tasks."""

    def __init__(self, options, schema: StructType, overwrite: bool):
        if overwrite:
            raise OptionError(
                "A topic cannot be overwritten: use mode('append') to add records to it."
            )
        self.opts = parse_sink_options(options, streaming=False)
        self.columns = _columns(schema, self.opts)

    def write(self, iterator) -> Written:
        return write_direct(iterator, self.columns, self.opts)


class QuillStreamWriter(DataSourceStreamArrowWriter):
    """df.writeStream.format("quill"): exactly-once unless asked for at-least-once."""

    def __init__(self, options, schema: StructType):
        self.opts = parse_sink_options(options, streaming=True)
        self.columns = _columns(schema, self.opts)
        self.exactly_once = self.opts.delivery == "exactly-once"
        if self.exactly_once:
            exactly_once.ensure_commits_topic(self.opts.bootstrap, self.opts.kafka)

    def write(self, iterator) -> WriterCommitMessage:
        if not self.exactly_once:
            return write_direct(iterator, self.columns, self.opts)
        return exactly_once.write_task(iterator, self.columns, self.opts)

    def commit(self, messages, batchId: int) -> None:
        if self.exactly_once:
            exactly_once.commit_batch(self.opts, batchId, messages)

    def abort(self, messages, batchId: int) -> None:
        """Nothing to undo: the batch's begin markers stay, and the replay that a
        restarted query runs resumes from them."""
