"""Kafka's per-partition ``Log`` gauges, written straight to Prometheus text.

At 10,000 partitions these are 40,000 samples a scrape; building a
``prometheus_client`` sample object for each and formatting it took most of a
scrape's time (``bench/metrics.py``), so this one family group is rendered by hand,
with each partition's label text made once and kept. The output is the same text
format (``# HELP``, ``# TYPE``, one line per sample) and parses with
``prometheus_client.parser``.
"""

from __future__ import annotations

from collections.abc import Iterable

# (metric name as jmx_exporter names kafka.log:type=Log,name=X, help, attribute of Log)
LOG_GAUGES = (
    ("kafka_log_log_size", "Kafka's Log Size: bytes of the partition's segments", "size"),
    ("kafka_log_log_logendoffset", "Kafka's Log LogEndOffset", "leo"),
    ("kafka_log_log_logstartoffset", "Kafka's Log LogStartOffset", "lso"),
    ("kafka_log_log_numlogsegments", "Kafka's Log NumLogSegments", "segments"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class LogGaugeRenderer:
    """Renders the Log gauges of the logs it is given; keeps label text per partition."""

    def __init__(self) -> None:
        self._labels: dict[tuple[str, int], str] = {}

    def _label(self, topic: str, partition: int) -> str:
        key = (topic, partition)
        text = self._labels.get(key)
        if text is None:
            text = self._labels[key] = f'{{topic="{_escape(topic)}",partition="{partition}"}} '
        return text

    def render(self, logs: Iterable) -> str:
        """``logs``: Log objects (topic, partition, segments, log_start/end_offset)."""
        size, leo, lso, segs = [], [], [], []
        label = self._label
        for lg in logs:
            segments = lg.segments
            lbl = label(lg.topic, lg.partition)
            size.append(f"{lbl}{sum(s.size for s in segments)}")
            leo.append(f"{lbl}{lg.log_end_offset}")
            lso.append(f"{lbl}{lg.log_start_offset}")
            segs.append(f"{lbl}{len(segments)}")
        if len(self._labels) > 2 * len(size) + 1024:  # partitions moved away: forget them
            self._labels.clear()
        out = []
        for (name, help_text, _attr), lines in zip(LOG_GAUGES, (size, leo, lso, segs), strict=True):
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            if lines:
                prefix = "\n" + name
                out.append(name + prefix.join(lines) + "\n")
        return "".join(out)
