"""Waiting on a condition with a generous limit: the one wait loop of the tests.

``wait_until(predicate)`` polls until the predicate returns something truthy and returns
it; past ``timeout`` seconds it fails naming ``what``. ``wait_log`` waits for a line in a
broker's log (changes the broker applies later, as quotas and SASL sessions, are logged).
Never assert wall time: wait on the condition.
"""

from __future__ import annotations

import time
from pathlib import Path


def wait_until(predicate, timeout: float = 60.0, what: str = "condition", interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def wait_log(cluster, text: str, timeout: float = 20.0, broker: int = 0) -> None:
    """Until the broker's log holds ``text``."""
    log_path = Path(cluster.brokers[broker].log_path)
    wait_until(
        lambda: text in log_path.read_text(errors="replace"),
        timeout,
        f"the broker to log {text!r}",
    )
