"""Kafka's error codes, and the exception our layers raise to carry one.

The codes themselves come from kio (generated from Kafka's own error table), so the
names and numbers are exactly Kafka's. Every layer below the server raises
``KafkaError(ErrorCode.x, "a sentence for people")``; the server turns it into the
code on the wire and logs the sentence.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "RecordValidationError"]


class KafkaError(Exception):
    """An error with a Kafka error code and a human message."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"


class RecordValidationError(KafkaError):
    """Kafka's RecordValidationException: records of an append refused one by one.
    ``record_errors`` are (batch index, message) pairs, the Produce response's
    record_errors (v8+); the append as a whole fails with ``code``."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(code, message)
        self.record_errors = record_errors
