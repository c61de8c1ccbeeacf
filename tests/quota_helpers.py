"""Shared by the quota tests: wait for what a broker logs."""

from __future__ import annotations

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
