"""A SparkSession for Quill's pipeline, with `quill` registered.

Python workers must run the interpreter that has pyspark, pyarrow, confluent-kafka
and this package: when PYSPARK_PYTHON is not set, it is this process's interpreter
(for a Spark cluster, set PYSPARK_PYTHON to the workers' interpreter instead).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

DEFAULT_MASTER = "local[*]"
# Spark's 200 shuffle partitions are for clusters; a pipeline job's state is small.
DEFAULT_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
}


def spark_session(
    master: str | None = None,
    app_name: str = "quill-pipeline",
    conf: Mapping[str, str] | None = None,
):
    from pyspark.sql import SparkSession

    from pipeline import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master or DEFAULT_MASTER)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("QUILL_SPARK_LOG_LEVEL", "WARN"))
    register(spark)
    return spark
