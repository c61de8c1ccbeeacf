"""Broker metrics under Kafka's names, served in Prometheus text format.

The hot path only bumps plain ints and appends to bounded deques (``stats.py``);
everything else (per-partition gauges, ISR counts, quantiles, quota rates) is read
from the broker's own state when a scrape asks (``collector.py``), and the HTTP
endpoint (``http.py``) runs on the broker's event loop so it reads that state between
two requests, never in the middle of one. Names and labels are what the jmx_exporter
rules of Strimzi's ``kafka-metrics.yaml`` make of Kafka's MBeans (``names.py``).
"""
