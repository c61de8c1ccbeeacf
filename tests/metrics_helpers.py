"""Scraping a broker's metrics endpoint in tests and benchmarks."""

from __future__ import annotations

import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape_text(port: int, host: str = "127.0.0.1") -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return resp.read().decode()


def samples(port: int) -> dict[tuple[str, frozenset], float]:
    """{(sample name, frozenset of label items): value} of one scrape."""
    out = {}
    for family in text_string_to_metric_families(scrape_text(port)):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def names(port: int) -> set[str]:
    """Every family and sample name of one scrape (a family may have no samples yet)."""
    out = set()
    for family in text_string_to_metric_families(scrape_text(port)):
        out.add(family.name)
        out.update(s.name for s in family.samples)
    return out


def value(port: int, name: str, **labels: str) -> float:
    """One sample's value (0 when the broker does not serve it yet)."""
    return samples(port).get((name, frozenset(labels.items())), 0.0)


def wait_value(port: int, name: str, check, timeout: float = 90.0, **labels: str) -> float:
    """Scrape until ``check(value)`` holds; the last value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = value(port, name, **labels)
        if check(seen):
            return seen
        time.sleep(0.5)
    raise AssertionError(f"{name}{labels} stayed at {seen} for {timeout:.0f}s")
