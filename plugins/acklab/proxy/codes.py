"""The Kafka protocol's numbers acklab names: API keys, the error codes (Kafka's `Errors` enum) and
which of them a fault may answer each request with. Pure data, cheap to import."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PRODUCE = 0
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
CONSUMER_GROUP_HEARTBEAT = 68

APIS: Mapping[str, int] = {  # the requests producers and consumers send, by their protocol names
    "Produce": PRODUCE,
    "Metadata": METADATA,
    "FindCoordinator": FIND_COORDINATOR,
    "ApiVersions": 18,
    "InitProducerId": INIT_PRODUCER_ID,
    "AddPartitionsToTxn": ADD_PARTITIONS_TO_TXN,
    "AddOffsetsToTxn": ADD_OFFSETS_TO_TXN,
    "EndTxn": END_TXN,
    "TxnOffsetCommit": TXN_OFFSET_COMMIT,
    "OffsetCommit": OFFSET_COMMIT,
    "OffsetFetch": OFFSET_FETCH,
    "JoinGroup": JOIN_GROUP,
    "SyncGroup": SYNC_GROUP,
    "Heartbeat": HEARTBEAT,
    "LeaveGroup": LEAVE_GROUP,
    "ConsumerGroupHeartbeat": CONSUMER_GROUP_HEARTBEAT,
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
    """A Kafka error a broker may answer a request with; `retriable` as Kafka classifies it (its
    exception is a RetriableException): a client retries it, within its retry budget."""

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
        # the group coordinator's (consumer groups, and the offsets a transaction commits)
        ErrorCode("OFFSET_METADATA_TOO_LARGE", 12, False),
        ErrorCode("ILLEGAL_GENERATION", 22, False),
        ErrorCode("INCONSISTENT_GROUP_PROTOCOL", 23, False),
        ErrorCode("INVALID_GROUP_ID", 24, False),
        ErrorCode("UNKNOWN_MEMBER_ID", 25, False),
        ErrorCode("INVALID_SESSION_TIMEOUT", 26, False),
        ErrorCode("REBALANCE_IN_PROGRESS", 27, False),
        ErrorCode("INVALID_COMMIT_OFFSET_SIZE", 28, False),
        ErrorCode("GROUP_ID_NOT_FOUND", 69, False),
        ErrorCode("MEMBER_ID_REQUIRED", 79, False),
        ErrorCode("GROUP_MAX_SIZE_REACHED", 81, False),
        ErrorCode("FENCED_INSTANCE_ID", 82, False),
        ErrorCode("UNSTABLE_OFFSET_COMMIT", 88, True),
        ErrorCode("UNKNOWN_TOPIC_ID", 100, True),
        ErrorCode("FENCED_MEMBER_EPOCH", 110, False),
        ErrorCode("UNRELEASED_INSTANCE_ID", 111, False),
        ErrorCode("UNSUPPORTED_ASSIGNOR", 112, False),
        ErrorCode("STALE_MEMBER_EPOCH", 113, False),
        ErrorCode("TRANSACTION_ABORTABLE", 120, False),
        ErrorCode("INVALID_REGULAR_EXPRESSION", 128, False),
    )
}
_BY_CODE = {error.code: error.name for error in ERRORS.values()}

# A coordinator maps a timed-out write to its log to COORDINATOR_NOT_AVAILABLE; only InitProducerId
# answers REQUEST_TIMED_OUT (from Kafka 3.3, when the controller is slow to hand out producer ids: KAFKA-14417).
_COORDINATOR = ("COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "UNKNOWN_SERVER_ERROR")
_TXN = (*_COORDINATOR, "CONCURRENT_TRANSACTIONS", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
# The group coordinator's: its own state, then the authorizer's (every group request checks the group's ACL).
_GROUP = (*_COORDINATOR, "GROUP_AUTHORIZATION_FAILED")
ANSWERABLE: Mapping[int, tuple[str, ...]] = {
    # the requests a fault may answer with an error in the broker's place, and the errors each may
    # carry (the "Errors" of Kafka's message schemas and the broker's handling of each request, as
    # Kafka 4.3 answers them; some only from a version on: `ANSWERED_FROM`)
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
    # per partition. The group's checks (generation, member, instance id) from v3; never REBALANCE_IN_PROGRESS
    # (a classic group does not check its state for transactional commits); a transaction's verification
    # answers INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE (v4+, KIP-890)
    TXN_OFFSET_COMMIT: (
        *_GROUP, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID",
        "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_TXN_STATE", "CONCURRENT_TRANSACTIONS", "TRANSACTION_ABORTABLE",
        "UNKNOWN_TOPIC_OR_PARTITION", "TOPIC_AUTHORIZATION_FAILED", "OFFSET_METADATA_TOO_LARGE", "INVALID_GROUP_ID",
    ),
    # per partition
    OFFSET_COMMIT: (
        *_GROUP, "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID", "INVALID_COMMIT_OFFSET_SIZE",
        "OFFSET_METADATA_TOO_LARGE", "UNKNOWN_TOPIC_OR_PARTITION", "TOPIC_AUTHORIZATION_FAILED", "INVALID_GROUP_ID", "GROUP_ID_NOT_FOUND",
        "STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH", "UNKNOWN_TOPIC_ID",
    ),
    # the group's error (v1: each partition's), or per partition (acklab.proxy.answers.PARTITION_ERRORS)
    OFFSET_FETCH: (
        *_GROUP, "GROUP_ID_NOT_FOUND", "INVALID_GROUP_ID", "UNKNOWN_MEMBER_ID", "STALE_MEMBER_EPOCH", "UNSTABLE_OFFSET_COMMIT",
        "TOPIC_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_ID",
    ),
    JOIN_GROUP: (
        *_GROUP, "INVALID_GROUP_ID", "INVALID_SESSION_TIMEOUT", "INCONSISTENT_GROUP_PROTOCOL", "UNKNOWN_MEMBER_ID", "MEMBER_ID_REQUIRED",
        "REBALANCE_IN_PROGRESS", "GROUP_MAX_SIZE_REACHED", "FENCED_INSTANCE_ID",
    ),
    SYNC_GROUP: (
        *_GROUP, "INVALID_GROUP_ID", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID",
        "INCONSISTENT_GROUP_PROTOCOL",
    ),
    HEARTBEAT: (*_GROUP, "INVALID_GROUP_ID", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID"),
    LEAVE_GROUP: (*_GROUP, "INVALID_GROUP_ID", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"),
    CONSUMER_GROUP_HEARTBEAT: (
        *_GROUP, "INVALID_REQUEST", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH", "UNSUPPORTED_ASSIGNOR", "UNRELEASED_INSTANCE_ID",
        "GROUP_MAX_SIZE_REACHED", "TOPIC_AUTHORIZATION_FAILED", "INVALID_REGULAR_EXPRESSION",
    ),
}
# Errors of `ANSWERABLE` a broker answers only from a version of the request on (the schemas'
# "Supported errors" and version notes; below it a broker answers an older error, e.g.
# INVALID_PRODUCER_EPOCH for PRODUCER_FENCED): a request of an earlier version is not answered
# with it, it reaches the broker (`unanswerable.<api>`).
ANSWERED_FROM: Mapping[int, Mapping[str, int]] = {
    INIT_PRODUCER_ID: {"PRODUCER_FENCED": 4},
    ADD_PARTITIONS_TO_TXN: {"PRODUCER_FENCED": 2},
    ADD_OFFSETS_TO_TXN: {"PRODUCER_FENCED": 2},
    END_TXN: {"PRODUCER_FENCED": 2},
    TXN_OFFSET_COMMIT: {
        "COORDINATOR_LOAD_IN_PROGRESS": 2, "ILLEGAL_GENERATION": 3, "UNKNOWN_MEMBER_ID": 3, "FENCED_INSTANCE_ID": 3, "TRANSACTION_ABORTABLE": 4,
    },
    OFFSET_COMMIT: {"FENCED_INSTANCE_ID": 7, "FENCED_MEMBER_EPOCH": 7, "GROUP_ID_NOT_FOUND": 9, "STALE_MEMBER_EPOCH": 9, "UNKNOWN_TOPIC_ID": 10},
    OFFSET_FETCH: {"UNSTABLE_OFFSET_COMMIT": 7, "UNKNOWN_MEMBER_ID": 9, "STALE_MEMBER_EPOCH": 9, "UNKNOWN_TOPIC_ID": 10},
    JOIN_GROUP: {"MEMBER_ID_REQUIRED": 4, "FENCED_INSTANCE_ID": 5},
    SYNC_GROUP: {"FENCED_INSTANCE_ID": 3},
    HEARTBEAT: {"FENCED_INSTANCE_ID": 3},
    LEAVE_GROUP: {"FENCED_INSTANCE_ID": 3},
    CONSUMER_GROUP_HEARTBEAT: {"INVALID_REGULAR_EXPRESSION": 1},
}
PRODUCE_ERRORS = ANSWERABLE[PRODUCE]


def error_name(code: int) -> str:
    """A Kafka error code's name (NONE for 0), or `error <code>` for one acklab does not name."""
    return "NONE" if code == 0 else _BY_CODE.get(code, f"error {code}")


def answered_from(api: int, code: int) -> int:
    """The first version of `api` a broker answers with the error `code` (0: every version)."""
    return ANSWERED_FROM.get(api, {}).get(error_name(code), 0)


def error_table(api: int = PRODUCE) -> str:
    """``NAME (code, retriable[, vN+]), ...``: the errors a fault may answer a request of `api` with, for messages."""
    since = ANSWERED_FROM.get(api, {})
    return ", ".join(
        f"{e.name} ({e.code}, {'retriable' if e.retriable else 'non-retriable'}{f', v{since[e.name]}+' if e.name in since else ''})"
        for e in (ERRORS[n] for n in ANSWERABLE[api])
    )
