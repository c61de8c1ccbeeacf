"""Shared by the quota tests: wait for what a broker logs, librdkafka's throttle statistics."""

from __future__ import annotations

import json


class Throttles:
    """librdkafka's stats_cb: the largest throttle time any broker reported."""

    def __init__(self) -> None:
        self.max_ms = 0

    def __call__(self, raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            self.max_ms = max(self.max_ms, b.get("throttle", {}).get("max", 0))
