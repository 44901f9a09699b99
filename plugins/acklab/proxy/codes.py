"""The Kafka protocol's numbers acklab names: API keys, and the error codes a fault may answer
with (Kafka's `Errors` enum). Pure data, cheap to import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRODUCE = 0
END_TXN = 26


@dataclass(frozen=True)
class ErrorCode:
    """A Kafka error a broker may answer a produce request with; `retriable` as Kafka classifies
    it (its exception is a RetriableException): a client retries it, within its retry budget."""

    name: str
    code: int
    retriable: bool


ERRORS: Mapping[str, ErrorCode] = {
    error.name: error
    for error in (
        ErrorCode("CORRUPT_MESSAGE", 2, True),
        ErrorCode("UNKNOWN_TOPIC_OR_PARTITION", 3, True),
        ErrorCode("LEADER_NOT_AVAILABLE", 5, True),
        ErrorCode("NOT_LEADER_OR_FOLLOWER", 6, True),
        ErrorCode("REQUEST_TIMED_OUT", 7, True),
        ErrorCode("NOT_ENOUGH_REPLICAS", 19, True),
        ErrorCode("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True),
        ErrorCode("KAFKA_STORAGE_ERROR", 56, True),
        ErrorCode("UNKNOWN_SERVER_ERROR", -1, False),
        ErrorCode("MESSAGE_TOO_LARGE", 10, False),
        ErrorCode("RECORD_LIST_TOO_LARGE", 18, False),
        ErrorCode("TOPIC_AUTHORIZATION_FAILED", 29, False),
        ErrorCode("INVALID_RECORD", 87, False),
    )
}


def error_table() -> str:
    """``NAME (code, retriable), ...``: the errors a fault may answer with, for messages."""
    return ", ".join(f"{e.name} ({e.code}, {'retriable' if e.retriable else 'non-retriable'})" for e in ERRORS.values())
