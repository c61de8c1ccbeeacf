"""Put on PYTHONPATH by the kill -9 tests (tests/test_pipeline_exactly_once.py) for the
jobs they start: Python imports `sitecustomize` at start-up in every process of the
job, so each one, Spark's data source planning workers included, imports pyspark from
the installed package (the same release, its bytecode cached) rather than compiling it
again from Spark's pyspark.zip, which Spark puts first on their path. Those workers are
started with `pyspark.daemon` whatever spark.python.daemon.module says (see
pipeline.spark_daemon): about 0.8 s of CPU saved per process, nine of them per start.
A sitecustomize found further along the path still runs."""

import importlib.machinery
import importlib.util
import os
import sys

from pipeline.spark_daemon import prefer_installed_pyspark

sys.path[:] = prefer_installed_pyspark(sys.path)

_here = os.path.dirname(os.path.abspath(__file__))
_next = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here]
)
if _next is not None:
    _module = importlib.util.module_from_spec(_next)
    _next.loader.exec_module(_module)
