"""Shared by the quota tests: wait for what a broker logs, librdkafka's throttle statistics."""

from __future__ import annotations

import json
import time
from pathlib import Path


def wait_log(cluster, text: str, timeout: float = 20.0) -> None:
    """Until the first broker's log holds ``text`` (quota changes are logged when applied)."""
    log_path = Path(cluster.brokers[0].log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log_path.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise AssertionError(f"the broker never logged {text!r}")


class Throttles:
    """librdkafka's stats_cb: the largest throttle time any broker reported."""

    def __init__(self) -> None:
        self.max_ms = 0

    def __call__(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            self.max_ms = max(self.max_ms, b.get("throttle", {}).get("max", 0))
