"""One error type for every console operation: a sentence for people and, when the
input was at fault, the field it concerns. Views show it; the API answers 400 with
{"detail": ..., "errors": {field: message}} (or the status given)."""

from __future__ import annotations


class OpError(Exception):
    def __init__(self, message: str, field: str | None = None, status: int = 400, **more):
        super().__init__(message)
        self.message = message
        self.errors: dict[str, str] = {field: message} if field else {}
        self.errors.update(more)
        self.status = status

    def as_dict(self) -> dict:
        return {"detail": self.message, "errors": self.errors}


class NotFound(OpError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message, field, status=404)


class ClusterUnavailable(OpError):
    """The cluster (brokers or ZooKeeper) did not answer in time."""

    def __init__(self, message: str):
        super().__init__(message, status=503)
