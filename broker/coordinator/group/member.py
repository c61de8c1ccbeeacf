"""MemberMetadata: one member of a classic group (Kafka's MemberMetadata).

A member awaiting a JoinGroup or SyncGroup response holds a callback; the coordinator
invokes it once with the result (handlers pass a callback that resolves a future).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Callback = Callable[[Any], None]


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Callback | None = field(default=None, repr=False)
    awaiting_sync: Callback | None = field(default=None, repr=False)
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def satisfied_when_timer_fires(self) -> bool:
        """Kafka's hasSatisfiedHeartbeat at expiry: a new member must have joined in
        time; one awaiting a rebalance response counts as alive."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(protocols) == list(self.supported_protocols)

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
