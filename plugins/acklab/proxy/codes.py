"""The Kafka protocol's numbers acklab names: API keys, the error codes (Kafka's `Errors` enum) and
which of them a fault may answer each request with. Pure data, cheap to import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRODUCE = 0
METADATA = 3
FIND_COORDINATOR = 10
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26

APIS: Mapping[str, int] = {  # the requests producers send, by their protocol names
    "Produce": PRODUCE,
    "Metadata": METADATA,
    "FindCoordinator": FIND_COORDINATOR,
    "ApiVersions": 18,
    "InitProducerId": INIT_PRODUCER_ID,
    "AddPartitionsToTxn": ADD_PARTITIONS_TO_TXN,
    "AddOffsetsToTxn": ADD_OFFSETS_TO_TXN,
    "EndTxn": END_TXN,
    "TxnOffsetCommit": 28,
}
API_NAMES = {key: name for name, key in APIS.items()}


def api_key(name: str | int) -> int:
    """The API key of a request named by its protocol name (`APIS`) or given as a key (0-99)."""
    if isinstance(name, int) and 0 <= name < 100:
        return name
    if isinstance(name, str) and name in APIS:
        return APIS[name]
    raise ValueError(f"unknown request type {name!r}; valid: {', '.join(APIS)} (or an API key number)")


def api_name(key: int) -> str:
    return API_NAMES.get(key, f"api {key}")


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
        ErrorCode("INVALID_TOPIC_EXCEPTION", 17, False),
        ErrorCode("INVALID_RECORD", 87, False),
        ErrorCode("NETWORK_EXCEPTION", 13, True),
        ErrorCode("COORDINATOR_LOAD_IN_PROGRESS", 14, True),
        ErrorCode("COORDINATOR_NOT_AVAILABLE", 15, True),
        ErrorCode("NOT_COORDINATOR", 16, True),
        ErrorCode("CONCURRENT_TRANSACTIONS", 51, True),
        ErrorCode("GROUP_AUTHORIZATION_FAILED", 30, False),
        ErrorCode("CLUSTER_AUTHORIZATION_FAILED", 31, False),
        ErrorCode("INVALID_REQUEST", 42, False),
        ErrorCode("OUT_OF_ORDER_SEQUENCE_NUMBER", 45, False),
        ErrorCode("DUPLICATE_SEQUENCE_NUMBER", 46, False),
        ErrorCode("INVALID_PRODUCER_EPOCH", 47, False),
        ErrorCode("INVALID_TXN_STATE", 48, False),
        ErrorCode("INVALID_PRODUCER_ID_MAPPING", 49, False),
        ErrorCode("INVALID_TRANSACTION_TIMEOUT", 50, False),
        ErrorCode("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53, False),
        ErrorCode("OPERATION_NOT_ATTEMPTED", 55, False),
        ErrorCode("PRODUCER_FENCED", 90, False),
    )
}
_BY_CODE = {error.code: error.name for error in ERRORS.values()}

# A coordinator maps a timed-out write to its log to COORDINATOR_NOT_AVAILABLE; only InitProducerId
# answers REQUEST_TIMED_OUT (from Kafka 3.3, when the controller is slow to hand out producer ids: KAFKA-14417).
_COORDINATOR = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "UNKNOWN_SERVER_ERROR")
_TXN = (*_COORDINATOR, "CONCURRENT_TRANSACTIONS", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
ANSWERABLE: Mapping[int, tuple[str, ...]] = {
    # the requests a fault may answer with an error in the broker's place, and the errors each may
    # carry (the "Errors" of Kafka's message schemas, as brokers answer them)
    PRODUCE: (
        "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT",
        "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "KAFKA_STORAGE_ERROR", "UNKNOWN_SERVER_ERROR", "MESSAGE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE", "TOPIC_AUTHORIZATION_FAILED", "INVALID_RECORD",
    ),
    # a topic's error in a Metadata answer (a broker's, rewritten: acklab.proxy.answers.metadata_with_error)
    METADATA: ("UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE", "INVALID_TOPIC_EXCEPTION", "TOPIC_AUTHORIZATION_FAILED"),
    FIND_COORDINATOR: (*_COORDINATOR, "GROUP_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "INVALID_REQUEST"),
    INIT_PRODUCER_ID: (*_TXN, "REQUEST_TIMED_OUT", "CLUSTER_AUTHORIZATION_FAILED", "INVALID_TRANSACTION_TIMEOUT"),
    ADD_PARTITIONS_TO_TXN: (*_TXN, "INVALID_TXN_STATE", "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PARTITION", "OPERATION_NOT_ATTEMPTED"),
    ADD_OFFSETS_TO_TXN: (*_TXN, "INVALID_TXN_STATE", "GROUP_AUTHORIZATION_FAILED"),
    END_TXN: (*_TXN, "INVALID_TXN_STATE"),
}
PRODUCE_ERRORS = ANSWERABLE[PRODUCE]


def error_name(code: int) -> str:
    """A Kafka error code's name (NONE for 0), or `error <code>` for one acklab does not name."""
    return "NONE" if code == 0 else _BY_CODE.get(code, f"error {code}")


def error_table(api: int = PRODUCE) -> str:
    """``NAME (code, retriable), ...``: the errors a fault may answer a request of `api` with, for messages."""
    return ", ".join(f"{e.name} ({e.code}, {'retriable' if e.retriable else 'non-retriable'})" for e in (ERRORS[n] for n in ANSWERABLE[api]))
