"""Kafka's ``Rate`` over a ``SampledTotal`` (org.apache.kafka.common.metrics.stats).

A rate is the sum of up to ``samples`` samples, each ``window_ms`` long, divided by the
time they span. A sample is opened by the first record after the previous one is
complete, so idle time makes no samples; and until ``samples - 1`` full windows have
passed the span is taken as that long anyway, so one burst on a fresh sensor does not
measure as an absurd rate (Kafka's ``Rate.windowSize``). Times are milliseconds.
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("value", "events", "last_window_ms")

    def __init__(self, now_ms: float) -> None:
        self.value = 0.0
        self.events = 0
        self.last_window_ms = now_ms

    def reset(self, now_ms: float) -> None:
        self.value = 0.0
        self.events = 0
        self.last_window_ms = now_ms


class Rate:
    """Value per second, measured as Kafka's quota sensors measure it."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        if samples < 2 or window_ms < 1:
            raise ValueError("a rate needs at least 2 samples of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.last_window_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1

    def measure(self, now_ms: float) -> float:
        """Per second."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).last_window_ms
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.last_window_ms)

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire:
                sample.reset(now_ms)
