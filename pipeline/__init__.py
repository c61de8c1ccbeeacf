"""Quill's data pipeline on Apache Spark: the `quill` data source and sink (PySpark
Python Data Source API, Spark >= 4.0) and reference jobs in `pipeline.jobs`.

    from pipeline import register, spark_session
    spark = spark_session("local[2]")          # or any SparkSession, then register(spark)
    df = spark.read.format("quill").option("kafka.bootstrap.servers", "host:9092") \\
        .option("subscribe", "clicks").load()
"""

from __future__ import annotations

__all__ = ["register", "spark_session"]


MIN_PYSPARK = (4, 2)  # ReadLimit admission control (maxOffsetsPerTrigger), Arrow stream writes


def register(spark) -> None:
    """Make format("quill") available to `spark` (idempotent)."""
    import pyspark

    version = tuple(int(x) for x in pyspark.__version__.split(".")[:2])
    if version < MIN_PYSPARK:
        raise RuntimeError(
            f"The quill data source needs pyspark >= {'.'.join(map(str, MIN_PYSPARK))}; "
            f"this is pyspark {pyspark.__version__}."
        )
    from pipeline.source import QuillDataSource

    spark.dataSource.register(QuillDataSource)


def spark_session(master: str | None = None, app_name: str = "quill-pipeline", conf=None):
    """A SparkSession with `quill` registered; see pipeline.session."""
    from pipeline.session import spark_session as make

    return make(master, app_name, conf)
