"""Kafka's per-partition ``Log`` gauges, written straight to Prometheus text.

At 10,000 partitions these are 40,000 samples a scrape; building a
``prometheus_client`` sample object for each and formatting it took most of a
scrape's time (``bench/metrics.py``), so this one family group is rendered by hand.
Each partition's four lines are kept with what they were made from (its segment list,
segment count, active segment size, start and end offsets); a scrape compares those
without allocating, and when no partition changed and none came or went it reuses the
whole text of the previous scrape. The output is the same text format (``# HELP``,
``# TYPE``, one line per sample) and parses with ``prometheus_client.parser``.
"""

from __future__ import annotations

from collections.abc import Collection

# metric name as jmx_exporter names kafka.log:type=Log,name=X, and its help text
LOG_GAUGES = (
    ("kafka_log_log_size", "Kafka's Log Size: bytes of the partition's segments"),
    ("kafka_log_log_logendoffset", "Kafka's Log LogEndOffset"),
    ("kafka_log_log_logstartoffset", "Kafka's Log LogStartOffset"),
    ("kafka_log_log_numlogsegments", "Kafka's Log NumLogSegments"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Entry:
    """One partition's lines and what they were made from."""

    __slots__ = ("segments", "count", "active", "leo", "lso", "lines")

    def update(self, lg, segments) -> None:
        self.segments, self.count = segments, len(segments)
        self.active = segments[-1].size if segments else 0
        self.leo, self.lso = lg.log_end_offset, lg.log_start_offset
        label = f'{{topic="{_escape(lg.topic)}",partition="{lg.partition}"}} '
        self.lines = (
            f"{label}{sum(s.size for s in segments)}",
            f"{label}{self.leo}",
            f"{label}{self.lso}",
            f"{label}{self.count}",
        )


class LogGaugeRenderer:
    """Renders the Log gauges of the logs it is given (see the module docstring)."""

    def __init__(self) -> None:
        # keyed by the Log object itself: its hash is its id, where a (topic, partition)
        # key would be hashed anew on every scrape
        self._entries: dict[object, _Entry] = {}
        self._text = b""

    def render(self, logs: Collection) -> bytes:
        """``logs``: the Log objects (LogManager.live_logs()), each scraped in full."""
        entries = self._entries
        changed = False
        for lg in logs:
            e = entries.get(lg)
            segments = lg.segments
            if (
                e is not None
                and e.segments is segments
                and e.count == len(segments)
                and e.leo == lg.log_end_offset
                and e.lso == lg.log_start_offset
                and e.active == (segments[-1].size if segments else 0)
            ):
                continue
            if e is None:
                e = entries[lg] = _Entry()
            e.update(lg, segments)
            changed = True
        if len(logs) != len(entries):  # partitions left this broker: keep only those given
            entries = self._entries = {lg: entries[lg] for lg in logs}
            changed = True
        if changed or not self._text:
            self._text = self._join(entries).encode()
        return self._text

    @staticmethod
    def _join(entries: dict[object, _Entry]) -> str:
        out = []
        for i, (name, help_text) in enumerate(LOG_GAUGES):
            out.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n")
            if entries:
                out.append(name + ("\n" + name).join(e.lines[i] for e in entries.values()) + "\n")
        return "".join(out)
