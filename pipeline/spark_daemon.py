"""Spark's Python worker daemon (`pyspark.daemon`), importing pyspark from the installed
package instead of from Spark's `pyspark.zip`.

Spark starts every Python worker process with `$SPARK_HOME/python/lib/pyspark.zip` (and
py4j's zip) first on its PYTHONPATH. Python never caches bytecode for a zip, so each
worker daemon (the tasks', and one per kind of data source planning: lookup, schema,
read, write) compiled pyspark's sources again: 1.2 s of CPU and more than 5 s on a busy
2-core machine, per process, several per query start. The installed pyspark next to
this package is the same release (the zip ships inside it) with its bytecode cached.

Use it with `--conf spark.python.daemon.module=pipeline.spark_daemon` (the kill tests of
tests/test_pipeline_exactly_once.py do). It serves the tasks' workers; Spark starts the
data source planning workers with `pyspark.daemon` whatever this setting says. The daemon
forks the workers as `pyspark.daemon` does (it is `pyspark.daemon`'s manager, run after
the path is reordered), so the worker modules it is given still load after the fork.
"""

from __future__ import annotations

import os
import sys


def _spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """`path` with Spark's zips moved to its end: used only when nothing else has them."""
    return [p for p in path if not _spark_zip(p)] + [p for p in path if _spark_zip(p)]


if __name__ == "__main__":
    sys.path[:] = prefer_installed_pyspark(sys.path)
    from pyspark.daemon import manager

    manager()
