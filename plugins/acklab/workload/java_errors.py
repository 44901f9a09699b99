"""The Java client's name for each librdkafka delivery error acklab can observe (a fact of the two
client families, used by the reports and by checks that name errors): the exception and the message users quote (Kafka's `Errors` descriptions and the producer's own texts, `<...>` for
the values), so a report shows an error the way users of either client meet it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ERRORS_PKG = "org.apache.kafka.common.errors"


@dataclass(frozen=True)
class JavaError:
    exception: str  # the class, in org.apache.kafka.common.errors unless qualified
    message: str
    note: str = ""  # where the two clients differ

    def text(self) -> str:
        """`org.apache.kafka.common.errors.X: message`, as a Java stack trace starts."""
        qualified = self.exception if "." in self.exception else f"{ERRORS_PKG}.{self.exception}"
        return f"{qualified}: {self.message}"


METADATA_TIMEOUT = "Topic <topic> not present in metadata after <max.block.ms> ms."

JAVA_ERRORS: Mapping[str, JavaError] = {
    "_MSG_TIMED_OUT": JavaError(
        "TimeoutException", "Expiring <n> record(s) for <topic>-<partition>:<ms> ms has passed since batch creation",
        "librdkafka's message.timeout.ms is Java's delivery.timeout.ms. librdkafka also fails so a record that never "
        f"got metadata, where Java's send() blocks max.block.ms and throws TimeoutException: {METADATA_TIMEOUT}",
    ),
    "_TIMED_OUT": JavaError(
        "TimeoutException", "Disconnected from node <id> due to timeout",
        "a request that timed out in the client (librdkafka: socket.timeout.ms; Java: request.timeout.ms)",
    ),
    "_TRANSPORT": JavaError("NetworkException", "Disconnected from node <id>"),
    "_FATAL": JavaError(
        "org.apache.kafka.common.KafkaException",
        "Cannot perform send because at least one previous transactional or idempotent request has failed with errors.",
        "Java's later sends; the cause (e.g. OutOfOrderSequenceException) is in librdkafka's fatal error text",
    ),
    "_UNKNOWN_TOPIC": JavaError("TimeoutException", METADATA_TIMEOUT, "Java waits max.block.ms for a missing topic"),
    "_UNKNOWN_PARTITION": JavaError("TimeoutException", METADATA_TIMEOUT, "Java waits max.block.ms for a missing partition"),
    "MSG_SIZE_TOO_LARGE": JavaError(
        "RecordTooLargeException",
        "The message is <n> bytes when serialized which is larger than <max.request.size>, which is the value of the "
        "max.request.size configuration.",
        "refused in the client (librdkafka: message.max.bytes); from the broker: The request included a message larger "
        "than the max message size the server will accept.",
    ),
    "INVALID_MSG": JavaError(
        "CorruptRecordException", "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt.",
    ),
    "UNKNOWN_TOPIC_OR_PART": JavaError("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    "LEADER_NOT_AVAILABLE": JavaError(
        "LeaderNotAvailableException", "There is no leader for this topic-partition as we are in the middle of a leadership election."
    ),
    "NOT_LEADER_FOR_PARTITION": JavaError(
        "NotLeaderOrFollowerException",
        "For requests intended only for the leader, this error indicates that the broker is not the current leader. For "
        "requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
        "Kafka's NOT_LEADER_OR_FOLLOWER (code 6)",
    ),
    "REQUEST_TIMED_OUT": JavaError("TimeoutException", "The request timed out."),
    "RECORD_LIST_TOO_LARGE": JavaError(
        "RecordBatchTooLargeException", "The request included message batch larger than the configured segment size on the server."
    ),
    "NOT_ENOUGH_REPLICAS": JavaError(
        "NotEnoughReplicasException", "Messages are rejected since there are fewer in-sync replicas than required."
    ),
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": JavaError(
        "NotEnoughReplicasAfterAppendException", "Messages are written to the log, but to fewer in-sync replicas than required."
    ),
    "TOPIC_AUTHORIZATION_FAILED": JavaError("TopicAuthorizationException", "Topic authorization failed."),
    "OUT_OF_ORDER_SEQUENCE_NUMBER": JavaError("OutOfOrderSequenceException", "The broker received an out of order sequence number"),
    "KAFKA_STORAGE_ERROR": JavaError("KafkaStorageException", "Disk error when trying to access log file on the disk."),
    "INVALID_RECORD": JavaError("InvalidRecordException", "This record has failed the validation on broker and hence will be rejected."),
    "UNKNOWN": JavaError("UnknownServerException", "The server experienced an unexpected error when processing the request"),
}


def java_names(librdkafka_names: Iterable[str]) -> set[str]:
    """The Java exception classes (simple names) the Java client raises for these librdkafka errors."""
    return {JAVA_ERRORS[name].exception.rsplit(".", 1)[-1] for name in librdkafka_names if name in JAVA_ERRORS}


def with_java(errors: Mapping[str, int]) -> list[dict[str, Any]]:
    """Each error of `errors` (name -> count: a librdkafka error name, or a Java exception class the
    Java client reported), most frequent first, with its librdkafka text and the Java client's `java`
    text and `note` ("" for an error without a known counterpart)."""
    from confluent_kafka import KafkaError

    rows = []
    for name, n in sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])):
        java, code = JAVA_ERRORS.get(name), getattr(KafkaError, name, None)
        reported_by_java = java is None and code is None and name.endswith("Exception")
        rows.append({
            "name": name, "count": n, "librdkafka": KafkaError(code).str() if isinstance(code, int) else "",
            "java": java.text() if java else name if reported_by_java else "", "note": java.note if java else "",
        })
    return rows
