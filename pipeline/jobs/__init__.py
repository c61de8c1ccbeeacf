"""Reference pipeline jobs, each runnable as `python -m pipeline.jobs.<name> --help`:

- clickstream_counts: a derived feed, one-minute counts per key with a watermark,
  written to a compacted summary topic (streaming, exactly-once).
- offline_load: a topic's new records into Parquet, one task per partition,
  restartable (batch).
- mirror: topics copied to another topic, exactly-once (streaming).
"""
