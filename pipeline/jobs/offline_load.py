"""Offline data load: copy a topic's new records into Parquet, one task per
topic-partition, restartable.

    python -m pipeline.jobs.offline_load --topic clickstream --output /data/clickstream \\
        [--starting-offsets earliest|JSON] [--ending-offsets latest|JSON] [--master ...]

Each run reads, for every partition, from where the last successful run ended (the
first run: --starting-offsets) up to the high watermark when the run starts (or
--ending-offsets), and writes the records into OUTPUT/run=NNNNNN/ with Spark's atomic
file commit: one task per topic-partition, so one file per partition per run. Only
after that commit does the run record its offsets in OUTPUT/_quill_offsets/NNNNNN.json.
A run that dies at any point left no offsets file, so running the job again starts from
the same original positions and overwrites the unfinished run's directory: no record
is loaded twice or skipped. Read it all back with spark.read.parquet(OUTPUT) (`run` is a
partition column).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from pipeline.jobs import common
from pipeline.offsets import OffsetReader, from_json, to_json
from pipeline.options import OptionError, check_source_mode, parse_source_options

OFFSETS_DIR = "_quill_offsets"  # Spark's file readers skip names starting with _


def previous_runs(output: Path) -> list[dict]:
    logs = sorted((output / OFFSETS_DIR).glob("*.json"))
    return [json.loads(p.read_text()) for p in logs]


def plan(args, runs: list[dict]) -> tuple[int, dict, dict]:
    """(run number, start offsets, end offsets) of the next run."""
    options = {
        "kafka.bootstrap.servers": args.bootstrap_server,
        "subscribe": args.topic,
        "startingOffsets": args.starting_offsets,
        "endingOffsets": args.ending_offsets,
        "failOnDataLoss": str(args.fail_on_data_loss).lower(),
    }
    opts = parse_source_options(options)
    check_source_mode(opts, streaming=False)
    offsets = OffsetReader(opts)
    try:
        offsets.check_exists()
        tps = offsets.partitions()
        if runs:
            done = from_json(runs[-1]["end"])
            new = [tp for tp in tps if tp not in done]  # partitions added since: earliest
            start = {**{tp: done[tp] for tp in tps if tp in done}, **offsets.earliest(new)}
        else:
            start = offsets.resolve(opts.starting_for(streaming=False), tps, "startingOffsets")
        end = offsets.resolve(opts.ending, tps, "endingOffsets")
    finally:
        offsets.close()
    for tp in tps:
        if end[tp] < start[tp]:
            raise OptionError(
                f"{tp[0]}-{tp[1]} ends at {end[tp]}, before the last run's end {start[tp]}: "
                "was the topic re-created? Load it into a new --output."
            )
    number = runs[-1]["run"] + 1 if runs else 1
    return number, start, end


def load(spark, args) -> dict | None:
    """One run; returns its offsets record, or None when there was nothing new."""
    output = Path(args.output)
    number, start, end = plan(args, previous_runs(output))
    records = sum(end[tp] - start[tp] for tp in end)
    if records == 0:
        print(f"{args.topic}: nothing new since run {number - 1}")
        return None
    assign = {}
    for topic, partition in sorted(end):
        assign.setdefault(topic, []).append(partition)
    df = (
        spark.read.format("quill")
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(to_json(start)))
        .option("endingOffsets", json.dumps(to_json(end)))
        .option("failOnDataLoss", str(args.fail_on_data_loss).lower())
        .option("includeHeaders", "true")
        .load()
    )
    run_dir = output / f"run={number:06d}"
    df.write.mode("overwrite").parquet(str(run_dir))
    record = {"run": number, "start": to_json(start), "end": to_json(end), "offsets": records}
    _write_atomically(output / OFFSETS_DIR / f"{number:06d}.json", json.dumps(record, indent=1))
    print(f"{args.topic}: run {number} loaded offsets {records} into {run_dir}")
    return record


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_args(argv=None):
    p = common.parser(__doc__.splitlines()[0], streaming=False)
    p.add_argument("--topic", required=True, help="topics, comma-separated")
    p.add_argument("--output", required=True, help="a directory every Spark worker can reach")
    p.add_argument("--starting-offsets", default="earliest", help="for the first run")
    p.add_argument("--ending-offsets", default="latest")
    p.add_argument(
        "--fail-on-data-loss",
        type=lambda v: v.lower() == "true",
        default=True,
        metavar="true|false",
        help="stop if records between two runs were deleted meanwhile (default true)",
    )
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    spark = common.session(args, "quill-offline-load")
    load(spark, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
