"""Bad options give clear errors before any work starts: the parsing on its own, then
the same mistakes made through Spark (the error surfaces at load()/start(), no task
runs)."""

from __future__ import annotations

import json

import pytest

pytest.register_assert_rewrite("tests.pipeline_helpers")

from pipeline.options import (  # noqa: E402
    OptionError,
    check_source_mode,
    parse_sink_options,
    parse_source_options,
)
from pipeline.source import plan_ranges, rate_limit  # noqa: E402
from tests.pipeline_helpers import create_topic, produce, topic_name  # noqa: E402

pytest_plugins = ["tests.pipeline_helpers"]  # the shared `spark` fixture

B = {"kafka.bootstrap.servers": "h:9092"}


def source(**options):
    return parse_source_options({**B, **options})


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' (got none"),
        (
            {"subscribe": "a", "assign": '{"a":[0]}'},
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
            "(got subscribe, assign)",
        ),
        ({"subscribe": " , "}, "must list one or more topics"),
        ({"subscribePattern": "(("}, "not a valid regular expression"),
        ({"assign": "{bad"}, "Option 'assign' is not valid JSON"),
        ({"assign": '{"a":0}'}, "must map to a list of partition numbers"),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":1'},
            "'startingOffsets' is not valid JSON",
        ),
        ({"subscribe": "a", "startingOffsets": "first"}, "'earliest', 'latest' or JSON offsets"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, "partition 'x' of topic 'a'"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "offset -3 for a-0"),
        ({"subscribe": "a", "startingOffsets": '{"a":{"0":"1"}}'}, "must be a whole number"),
        ({"subscribe": "a", "startingTimestamp": "yesterday"}, "milliseconds since the epoch"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "'maxOffsetsPerTrigger' must be a pos"),
        ({"subscribe": "a", "minPartitions": "two"}, "'minPartitions' must be a positive"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, "'failOnDataLoss' must be 'true' or 'false'"),
        ({"subscribe": "a", "startingOffset": "earliest"}, "Did you mean 'startingOffsets'?"),
        ({"subscribe": "a", "kafka.auto.offset.reset": "x"}, "use startingOffsets instead"),
        (
            {"subscribe": "a", "startingOffsetsByTimestampStrategy": "skip"},
            "must be 'error' or 'latest'",
        ),
    ],
)
def test_bad_source_options(options, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        source(**options)


def test_missing_bootstrap_servers():
    with pytest.raises(OptionError, match="'kafka.bootstrap.servers' must be set"):
        parse_source_options({"subscribe": "a"})


def test_batch_and_streaming_rules():
    with pytest.raises(OptionError, match="cannot be 'latest'"):
        check_source_mode(source(subscribe="a", startingOffsets="latest"), streaming=False)
    with pytest.raises(OptionError, match="cannot be 'latest'"):
        check_source_mode(source(subscribe="a", startingOffsets='{"a":{"0":-1}}'), streaming=False)
    with pytest.raises(OptionError, match="cannot be 'earliest'"):
        check_source_mode(source(subscribe="a", endingOffsets="earliest"), streaming=False)
    with pytest.raises(OptionError, match="are for batch queries"):
        check_source_mode(source(subscribe="a", endingOffsets="latest"), streaming=True)
    check_source_mode(source(subscribe="a", startingOffsets="latest"), streaming=True)


def test_good_source_options_are_understood():
    opts = source(
        SUBSCRIBE="a, b",  # names are case-insensitive, as in Spark
        startingOffsets=json.dumps({"a": {"0": 5, "1": -2}}),
        startingTimestamp="1700000000000",  # wins over startingOffsets, as in Spark
        maxOffsetsPerTrigger="100",
        includeHeaders="TRUE",
        **{"kafka.security.protocol": "PLAINTEXT"},
    )
    assert opts.topics == ("a", "b")
    assert opts.starting.kind == "timestamp" and opts.starting.timestamp == 1_700_000_000_000
    assert opts.max_offsets_per_trigger == 100 and opts.include_headers
    assert opts.kafka == {"security.protocol": "PLAINTEXT"}
    assert source(assign='{"t":[2,0,2]}').assigned == (("t", 0), ("t", 2))


def test_bad_sink_options():
    with pytest.raises(OptionError, match="'deliveryGuarantee' must be"):
        parse_sink_options({**B, "deliveryGuarantee": "maybe"}, streaming=True)
    with pytest.raises(OptionError, match="is for streaming writes"):
        parse_sink_options({**B, "deliveryGuarantee": "exactly-once"}, streaming=False)
    with pytest.raises(OptionError, match="Unknown option 'topics'.*Did you mean 'topic'"):
        parse_sink_options({**B, "topics": "x"}, streaming=False)
    with pytest.raises(OptionError, match="'queryId' must not contain '/'"):
        parse_sink_options({**B, "queryId": "a/b"}, streaming=True)


def test_range_planning_and_rate_limit():
    starts = {("a", 0): 0, ("a", 1): 10, ("b", 0): 5}
    ends = {("a", 0): 900, ("a", 1): 110, ("b", 0): 5}
    ranges = plan_ranges(starts, ends)
    assert [(r.topic, r.partition, r.start, r.end) for r in ranges] == [
        ("a", 0, 0, 900),
        ("a", 1, 10, 110),
    ]
    split = plan_ranges(starts, ends, min_partitions=10)
    assert len(split) == 10  # 9 for a-0 (900 of 1000 records), 1 for a-1
    assert sum(r.size for r in split) == 1000
    assert [(r.start, r.end) for r in split if r.partition == 0][:2] == [(0, 100), (100, 200)]
    capped = plan_ranges(starts, ends, max_records=250)
    assert max(r.size for r in capped) <= 250 and sum(r.size for r in capped) == 1000
    limited = rate_limit(starts, ends, 100)
    assert limited == {("a", 0): 90, ("a", 1): 20, ("b", 0): 5}


# --------------------------------------------------------------------------- via Spark


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


def load(spark, bootstrap, stream=False, **options):
    reader = (spark.readStream if stream else spark.read).format("quill")
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.spark
@pytest.mark.parametrize("stream", [False, True], ids=["batch", "streaming"])
def test_spark_reports_bad_options_at_load(spark, bootstrap, stream):
    topic = create_topic(bootstrap, topic_name("opt"), 2)
    with pytest.raises(Exception, match=r"exactly one of the options.*got subscribe, assign"):
        load(spark, bootstrap, stream, subscribe=topic, assign=json.dumps({topic: [0]}))
    with pytest.raises(Exception, match="'startingOffsets' is not valid JSON"):
        load(spark, bootstrap, stream, subscribe=topic, startingOffsets='{"x": {"0": 1}')
    with pytest.raises(Exception, match=r"names topic 'no-such-topic', which does not exist"):
        load(spark, bootstrap, stream, subscribe="no-such-topic")
    with pytest.raises(Exception, match=r"names partition .*-7, which does not exist"):
        load(spark, bootstrap, stream, assign=json.dumps({topic: [0, 7]}))
    # failOnDataLoss=false: waits for the topic instead
    load(spark, bootstrap, stream, subscribe="no-such-topic", failOnDataLoss="false")


@pytest.mark.spark
def test_spark_reports_offset_mistakes_before_reading(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("opt2"), 2)
    produce(bootstrap, topic, [{"value": b"x", "partition": p} for p in (0, 1)])
    with pytest.raises(Exception, match=r"Missing: .*-1"):
        load(
            spark, bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}})
        ).count()
    with pytest.raises(Exception, match="starting offset 5 is after the ending offset 1"):
        load(
            spark, bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 5, "1": 0}})
        ).count()
    with pytest.raises(Exception, match="cannot be 'latest'"):
        load(spark, bootstrap, subscribe=topic, startingOffsets="latest").count()
    with pytest.raises(Exception, match="fixed schema"):
        spark.read.format("quill").schema("value string").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("subscribe", topic).load().count()
    with pytest.raises(Exception, match="are for batch queries"):
        load(
            spark, bootstrap, stream=True, subscribe=topic, endingOffsets="latest"
        ).writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "ck")
        ).start().awaitTermination(60)


@pytest.mark.spark
def test_spark_reports_bad_sink_input(spark, bootstrap, tmp_path):
    df = spark.createDataFrame([(1, "x")], "id int, val string")
    writer = df.write.format("quill").option("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception, match="needs a 'value' column"):
        writer.option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="'key' column must be binary or string, but it is int"):
        df.selectExpr("id as key", "val as value").write.format("quill").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="needs a topic"):
        df.selectExpr("val as value").write.format("quill").option(
            "kafka.bootstrap.servers", bootstrap
        ).mode("append").save()
    with pytest.raises(Exception, match="cannot be overwritten"):
        df.selectExpr("val as value").write.format("quill").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", "t").mode("overwrite").save()
