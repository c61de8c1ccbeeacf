"""The reference jobs: clickstream counts into a compacted summary topic (with a
watermark, across a restart) and the restartable offline load into Parquet."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.register_assert_rewrite("tests.pipeline_helpers")

from pipeline.jobs import clickstream_counts, offline_load  # noqa: E402
from tests.pipeline_helpers import (  # noqa: E402
    consume_all,
    create_topic,
    latest_offsets,
    produce,
    topic_name,
)

pytest_plugins = ["tests.pipeline_helpers"]  # the shared `spark` fixture

MINUTE = 60_000
T0 = 1_700_000_040_000  # a minute boundary: 2023-11-14T22:14:00Z


@pytest.fixture(scope="module")
def bootstrap(cluster_factory):
    return cluster_factory(1).bootstrap


@pytest.mark.parametrize("job", ["clickstream_counts", "offline_load", "mirror"])
def test_jobs_have_a_command_line(job):
    run = subprocess.run(
        [sys.executable, "-m", f"pipeline.jobs.{job}", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "--master" in run.stdout and "--bootstrap-server" in run.stdout


def clicks(pages_and_times):
    return [{"key": page.encode(), "value": b"{}", "timestamp": ts} for page, ts in pages_and_times]


def summary(bootstrap, topic) -> dict[str, dict]:
    """What a compacted topic keeps: the last value of each key."""
    latest = {}
    for r in consume_all(bootstrap, topic):
        latest[r.key.decode()] = json.loads(r.value)
    return latest


@pytest.mark.spark
def test_clickstream_counts_with_watermark_and_restart(spark, bootstrap, tmp_path):
    source = topic_name("clicks")
    target = topic_name("click-counts")
    argv = [
        "--bootstrap-server",
        bootstrap,
        "--input-topic",
        source,
        "--input-partitions",
        "2",
        "--output-topic",
        target,
        "--checkpoint",
        str(tmp_path / "ck"),
        "--available-now",
        "--watermark",
        "1 minute",
    ]
    args = clickstream_counts.parse_args(argv)
    # started before anyone clicked: it creates its input topic and writes nothing
    assert clickstream_counts.start(spark, args).awaitTermination(180)
    assert sorted(latest_offsets(bootstrap, source).items()) == [(0, 0), (1, 0)]
    assert consume_all(bootstrap, target) == []
    first = [("home", T0 + 1000), ("home", T0 + 20_000), ("cart", T0 + 30_000)]
    first += [("home", T0 + MINUTE + 5000), ("cart", T0 + 2 * MINUTE + 30_000)]
    produce(bootstrap, source, clicks(first))
    assert clickstream_counts.start(spark, args).awaitTermination(180)

    w0, w1, w2, w3 = (f"2023-11-14T22:{14 + i}:00Z" for i in range(4))
    # The watermark is 22:15:30 (latest event 22:16:30 minus 1 minute): only the 22:14
    # window has closed and been written.
    assert counts(bootstrap, target) == {f"{w0}|home": 2, f"{w0}|cart": 1}
    record = summary(bootstrap, target)[f"{w0}|cart"]
    assert record == {"window_start": w0, "window_end": w1, "key": "cart", "count": 1}

    # Restarted from the checkpoint: a click for the closed 22:14 window is too late
    # and dropped; 22:17:00 moves the watermark to 22:16:00, closing 22:15.
    late = [("home", T0 + 10_000), ("cart", T0 + 2 * MINUTE + 40_000), ("cart", T0 + 3 * MINUTE)]
    produce(bootstrap, source, clicks(late))
    assert clickstream_counts.start(spark, args).awaitTermination(180)
    assert counts(bootstrap, target) == {f"{w0}|home": 2, f"{w0}|cart": 1, f"{w1}|home": 1}

    produce(bootstrap, source, clicks([("home", T0 + 6 * MINUTE)]))
    assert clickstream_counts.start(spark, args).awaitTermination(180)
    assert counts(bootstrap, target) == {
        f"{w0}|home": 2,
        f"{w0}|cart": 1,
        f"{w1}|home": 1,
        f"{w2}|cart": 2,
        f"{w3}|cart": 1,
    }
    # each count was written exactly once
    assert len(consume_all(bootstrap, target)) == 5


def counts(bootstrap, topic) -> dict[str, int]:
    return {k: v["count"] for k, v in summary(bootstrap, topic).items()}


def load_args(bootstrap, topic, output):
    return offline_load.parse_args(
        ["--bootstrap-server", bootstrap, "--topic", topic, "--output", str(output)]
    )


@pytest.mark.spark
def test_offline_load_is_restartable(spark, bootstrap, tmp_path):
    topic = create_topic(bootstrap, topic_name("offline"), 3)
    output = tmp_path / "parquet"
    args = load_args(bootstrap, topic, output)
    produce(bootstrap, topic, [{"value": b"a%04d" % i, "partition": i % 3} for i in range(300)])
    first = offline_load.load(spark, args)
    assert first["run"] == 1 and first["end"] == {topic: {"0": 100, "1": 100, "2": 100}}
    files = list((output / "run=000001").glob("*.parquet"))
    assert len(files) == 3  # one task, so one file, per topic-partition

    assert offline_load.load(spark, args) is None  # nothing new
    produce(bootstrap, topic, [{"value": b"b%04d" % i, "partition": i % 2} for i in range(50)])
    second = offline_load.load(spark, args)
    assert second["start"] == first["end"]
    assert len(list((output / "run=000002").glob("*.parquet"))) == 2  # partition 2 had nothing

    # A run that died after writing its files but before recording its offsets: the
    # next run starts from the same place and replaces the unfinished run's files.
    produce(bootstrap, topic, [{"value": b"c%04d" % i, "partition": 2} for i in range(20)])
    third = offline_load.load(spark, args)
    (output / offline_load.OFFSETS_DIR / "000003.json").unlink()
    produce(bootstrap, topic, [{"value": b"d%04d" % i, "partition": 0} for i in range(5)])
    again = offline_load.load(spark, args)
    assert again["run"] == 3 and again["start"] == third["start"]

    table = spark.read.parquet(str(output))
    values = sorted(bytes(r.value) for r in table.select("value").collect())
    expected = [b"a%04d" % i for i in range(300)] + [b"b%04d" % i for i in range(50)]
    expected += [b"c%04d" % i for i in range(20)] + [b"d%04d" % i for i in range(5)]
    assert values == sorted(expected)
    assert table.select("topic", "partition", "offset").distinct().count() == 375
    assert sorted(r.run for r in table.select("run").distinct().collect()) == [1, 2, 3]
