"""Kafka's per-partition ``Log`` gauges, written straight to Prometheus text.

At 10,000 partitions these are 40,000 samples a scrape; building a
``prometheus_client`` sample object for each and formatting it took most of a
scrape's time, so this one family group is rendered by hand: each partition's four
lines are made once and reused while its log has not changed (same segment list,
segment count, active segment size, start and end offsets). The output is the same
text format (``# HELP``, ``# TYPE``, one line per sample) and parses with
``prometheus_client.parser``.
"""

from __future__ import annotations

from collections.abc import Iterable

# metric name as jmx_exporter names kafka.log:type=Log,name=X, and its help text
LOG_GAUGES = (
    ("kafka_log_log_size", "Kafka's Log Size: bytes of the partition's segments"),
    ("kafka_log_log_logendoffset", "Kafka's Log LogEndOffset"),
    ("kafka_log_log_logstartoffset", "Kafka's Log LogStartOffset"),
    ("kafka_log_log_numlogsegments", "Kafka's Log NumLogSegments"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class LogGaugeRenderer:
    """Renders the Log gauges of the logs it is given; keeps each partition's lines."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, int], tuple[tuple, tuple[str, str, str, str]]] = {}

    def _make(self, lg, segments) -> tuple[str, str, str, str]:
        label = f'{{topic="{_escape(lg.topic)}",partition="{lg.partition}"}} '
        return (
            f"{label}{sum(s.size for s in segments)}",
            f"{label}{lg.log_end_offset}",
            f"{label}{lg.log_start_offset}",
            f"{label}{len(segments)}",
        )

    def render(self, logs: Iterable) -> str:
        """``logs``: Log objects (topic, partition, segments, log_start/end_offset)."""
        cache, fresh, make = self._lines, {}, self._make
        get = cache.get
        for lg in logs:
            segments = lg.segments
            tp = (lg.topic, lg.partition)
            key = (
                id(segments),
                len(segments),
                segments[-1].size if segments else 0,
                lg.log_end_offset,
                lg.log_start_offset,
            )
            hit = get(tp)
            fresh[tp] = hit if hit is not None and hit[0] == key else (key, make(lg, segments))
        self._lines = fresh  # partitions gone from this broker are forgotten
        columns = list(zip(*(lines for _key, lines in fresh.values()), strict=True)) or [()] * 4
        out = []
        for (name, help_text), column in zip(LOG_GAUGES, columns, strict=True):
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            if column:
                out.append(name + ("\n" + name).join(column) + "\n")
        return "".join(out)
