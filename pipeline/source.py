"""The `quill` data source: Quill (or any Kafka) topics as Spark DataFrames.

    spark.read.format("quill")          # batch: DataSourceReader
    spark.readStream.format("quill")    # streaming: DataSourceStreamReader
    df.write / df.writeStream .format("quill")   # sink: pipeline.sink

Options and schema are Spark's Kafka connector's (see pipeline.options). A query reads
one input partition per topic-partition offset range (more with minPartitions or
maxRecordsPerPartition); each task reads its range from the leader with librdkafka and
yields Arrow record batches (pipeline.consumer). Offsets are planned on the driver from
the high watermark (pipeline.offsets) and kept in Spark's checkpoint as
{topic: {partition: offset}}, so a restarted query resumes exactly where it stopped.
Partitions that appear later join at their earliest offset; deleted topics and offsets
that went back follow failOnDataLoss.
"""

from __future__ import annotations

import math

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pipeline.consumer import OffsetRange, read_range
from pipeline.offsets import TP, OffsetReader, data_loss, from_json, to_json
from pipeline.options import (
    OffsetSpec,
    OptionError,
    SourceOptions,
    check_source_mode,
    parse_source_options,
)
from pipeline.schema import arrow_schema, source_schema


def plan_ranges(
    starts: dict[TP, int],
    ends: dict[TP, int],
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """Non-empty ranges, one per partition, split further as Spark's
    KafkaOffsetRangeCalculator does: by size share up to minPartitions, then so that
    none holds more than maxRecordsPerPartition records."""
    ranges = [
        OffsetRange(t, p, starts[(t, p)], end)
        for (t, p), end in sorted(ends.items())
        if end > starts[(t, p)]
    ]
    if min_partitions and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        ranges = [
            part
            for r in ranges
            for part in _split(r, max(1, round(r.size / total * min_partitions)))
        ]
    if max_records:
        ranges = [part for r in ranges for part in _split(r, math.ceil(r.size / max_records))]
    return ranges


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [
        OffsetRange(r.topic, r.partition, a, b)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def rate_limit(begin: dict[TP, int], end: dict[TP, int], limit: int) -> dict[TP, int]:
    """maxOffsetsPerTrigger, shared among partitions by backlog (Spark's rateLimit)."""
    sizes = {tp: end[tp] - begin[tp] for tp in end if tp in begin and end[tp] > begin[tp]}
    total = sum(sizes.values())
    if total <= limit:
        return end
    limited = dict(end)
    for tp, size in sizes.items():
        share = limit * size / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(end[tp], begin[tp] + step)
    return limited


def _check_schema(schema: StructType, opts: SourceOptions) -> None:
    expected = source_schema(opts.include_headers)
    if schema != expected:
        raise OptionError(
            "The quill source has a fixed schema (Spark's Kafka schema) and cannot be given "
            f"another: expected {expected.simpleString()}, got {schema.simpleString()}. "
            "Leave out .schema(...) and cast or parse the columns in the query."
        )


class QuillBatchReader(DataSourceReader):
    """spark.read: offsets are resolved once, when the query is planned."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        check_source_mode(opts, streaming=False)
        _check_schema(schema, opts)
        self.opts = opts
        self.schema = schema
        self.ranges = self._plan()

    def _plan(self) -> list[OffsetRange]:
        opts = self.opts
        offsets = OffsetReader(opts)
        try:
            offsets.check_exists()
            tps = offsets.partitions()
            starts = offsets.resolve(opts.starting_for(streaming=False), tps, "startingOffsets")
            ends = offsets.resolve(opts.ending or OffsetSpec("latest"), tps, "endingOffsets")
        finally:
            offsets.close()
        for tp in tps:
            if starts[tp] > ends[tp]:
                raise OptionError(
                    f"For {tp[0]}-{tp[1]} the starting offset {starts[tp]} is after the ending "
                    f"offset {ends[tp]} (startingOffsets {opts.starting_for(False).describe()}, "
                    f"endingOffsets {(opts.ending or OffsetSpec('latest')).describe()})."
                )
        return plan_ranges(starts, ends, opts.min_partitions, opts.max_records_per_partition)

    def partitions(self) -> list[OffsetRange]:
        return list(self.ranges)

    def read(self, partition):
        if not isinstance(partition, OffsetRange):  # Spark's placeholder for "no ranges"
            return iter(())
        return read_range(partition, self.opts, arrow_schema(self.schema))


class QuillStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """spark.readStream: one micro-batch per [start, end) offsets, end chosen by
    `latestOffset` under the trigger's read limit (maxOffsetsPerTrigger)."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        check_source_mode(opts, streaming=True)
        _check_schema(schema, opts)
        self.opts = opts
        self.schema = schema
        self._offsets: OffsetReader | None = None  # driver only, made when first needed
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow's end

    @property
    def offsets(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.opts)
        return self._offsets

    def initialOffset(self) -> dict:
        self.offsets.check_exists()
        tps = self.offsets.partitions()
        start = self.offsets.resolve(self.opts.starting_for(streaming=True), tps, "startingOffsets")
        return to_json(start)

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.offsets.partitions()
        self._target = self.offsets.latest(tps)

    def reportLatestOffset(self) -> dict:
        return to_json(self.offsets.latest(self.offsets.partitions()))

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_json(start)
        tps = self.offsets.partitions()
        latest = self._target if self._target is not None else self.offsets.latest(tps)
        end: dict[TP, int] = {}
        gone = sorted(tp for tp in begin if tp not in tps)
        if gone:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            data_loss(f"Partitions {names} no longer exist.", self.opts.fail_on_data_loss)
        joined = [tp for tp in tps if tp not in begin and tp in latest]
        # New partitions join at their earliest offset and are read from the next batch,
        # so every batch's ranges follow from the checkpointed offsets alone.
        end.update(self.offsets.earliest(joined))
        went_back = [tp for tp in tps if tp in begin and tp in latest and latest[tp] < begin[tp]]
        for tp in tps:
            if tp in begin and tp not in went_back:
                # (a partition new since Trigger.AvailableNow's target stays where it is)
                end[tp] = max(begin[tp], latest.get(tp, begin[tp]))
        if went_back:
            data_loss(
                "The latest offset of "
                + ", ".join(
                    f"{t}-{p} went back from {begin[(t, p)]} to {latest[(t, p)]}"
                    for t, p in went_back
                )
                + " (was the topic deleted and re-created?).",
                self.opts.fail_on_data_loss,
            )
            end.update(self.offsets.earliest(went_back))  # start such partitions over
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        return to_json(end)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        begin = from_json(start)
        stop = from_json(end)
        # A partition absent from start, or reset by latestOffset, reads nothing now.
        starts = {tp: min(begin.get(tp, e), e) for tp, e in stop.items()}
        return plan_ranges(
            starts, stop, self.opts.min_partitions, self.opts.max_records_per_partition
        )

    def read(self, partition):
        return read_range(partition, self.opts, arrow_schema(self.schema))

    def commit(self, end: dict) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to the cluster."""

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None


class QuillDataSource(DataSource):
    """Registered as "quill" by `pipeline.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        return "quill"

    def schema(self) -> StructType:
        """Called when a read is defined (load()): every source option is checked here,
        and the topics' existence with failOnDataLoss, before any work starts."""
        opts = parse_source_options(self.options)
        offsets = OffsetReader(opts)
        try:
            offsets.check_exists()
        finally:
            offsets.close()
        return source_schema(opts.include_headers)

    def reader(self, schema: StructType) -> QuillBatchReader:
        return QuillBatchReader(parse_source_options(self.options), schema)

    def streamReader(self, schema: StructType) -> QuillStreamReader:
        return QuillStreamReader(parse_source_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool):
        from pipeline.sink import QuillWriter

        return QuillWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from pipeline.sink import QuillStreamWriter

        return QuillStreamWriter(self.options, schema)
