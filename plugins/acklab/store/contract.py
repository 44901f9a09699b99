"""The delivery matrix's contract: the send-log states, the outcome classes of a message, the
matrix's count and metric columns and the identities that make a row balance. The Spark audit
(`acklab.checker.audit`) writes the matrix to it, the Great Expectations verdict validates it.
Pure Python."""

from __future__ import annotations

from collections.abc import Mapping

# A sent message's final state in the send log; a planned message never handed to produce() is UNSENT.
STATES = ("acked", "failed", "unknown")
UNSENT = "unsent"
STATE_DOCS: Mapping[str, str] = {
    "acked": "the delivery report succeeded",
    "failed": "the delivery report failed, `produce()` refused the message, or a fatal producer error failed it",
    "unknown": "no delivery report (the producer stopped waiting), or acked in a transaction whose outcome was never learned",
    UNSENT: "planned, never handed to `produce()`: the load stopped early",
}

# The outcome class of every sent message (exclusive), by send-log state and `copies`, the number of
# topic records carrying its id. Ids found only in the topic are "unexpected", not a sent message's class.
OUTCOME_DOCS: Mapping[str, str] = {
    "delivered": "acked, copies == 1",
    "lost": "acked, copies == 0",
    "acked_duplicated": "acked, copies > 1",
    "failed_clean": "failed, copies == 0 (the client knew)",
    "indeterminate": "failed or unknown, copies >= 1 (the client was told failure or nothing, the write exists)",
    "unknown_absent": "unknown, copies == 0",
    "aborted_clean": "in an aborted transaction, copies == 0",
    "aborted_visible": "in an aborted transaction, copies >= 1: a read_committed reader saw it",
}
SENT_OUTCOMES = tuple(OUTCOME_DOCS)
UNEXPECTED = "unexpected"
OUTCOMES = (*SENT_OUTCOMES, UNEXPECTED)

COUNT_DOCS: Mapping[str, str] = {
    "planned": "send-log rows: every message the load planned",
    "sent": "planned messages with a client outcome (acked, failed or unknown)",
    UNSENT: "planned messages never handed to `produce()`",
    "refused": "messages `produce()` (Java: `send()`) itself rejected with a non-retriable error (failed without reaching the wire)",
    "fatal": "messages failed by a producer's fatal error (sent or not)",
    "acked": "send-log state acked",
    "failed": "send-log state failed",
    "unknown": "send-log state unknown",
    "records_read": "topic records read by the audit (read_committed)",
    **{name: f"sent messages of class {name}: {doc}" for name, doc in OUTCOME_DOCS.items() if name not in ("aborted_clean", "aborted_visible")},
    "duplicated": "sent messages with copies > 1",
    "duplicates": "their extra copies",
    UNEXPECTED: "records whose id is unparseable or was never sent",
    "reordered": "messages whose first copy has a lower seq than an earlier first copy of the same key in that partition",
    "misrouted": "acked messages acked into, or stored (in the topic they were sent to) in, another partition than the one their key maps to",
    "offset_mismatch": "acked messages present in the topic, not misrouted or misdirected, but with no copy at their acked (partition, offset)",
    "misdirected": "sent messages with a copy in another of the scenario's topics than the one they were sent to (whatever their state)",
    "aborted": "messages of aborted transactions",
    "aborted_acked": "messages of aborted transactions that were acked before the abort",
    "aborted_clean": f"class aborted_clean: {OUTCOME_DOCS['aborted_clean']}",
    "aborted_visible": f"class aborted_visible: {OUTCOME_DOCS['aborted_visible']}",
}
COUNT_COLUMNS = (
    "planned", "sent", UNSENT, "refused", "fatal", "acked", "failed", "unknown", "records_read", "delivered", "lost",
    "duplicated", "duplicates", "acked_duplicated", "failed_clean", "indeterminate", "unknown_absent", UNEXPECTED,
    "reordered", "misrouted", "offset_mismatch", "misdirected", "aborted", "aborted_acked", "aborted_clean", "aborted_visible",
)
METRIC_DOCS: Mapping[str, str] = {
    "ack_latency_p50_ms": "median of ack_ts - send_ts over acked messages (exact, microsecond resolution)",
    "ack_latency_p95_ms": "95th percentile of the same",
    "ack_latency_p99_ms": "99th percentile of the same",
    "ack_latency_max_ms": "maximum of the same",
    "acked_per_s": "acked messages / (last ack - first send)",
    "longest_ack_gap_s": "longest interval without an ack from the first send to the last ack (ties: the earliest)",
    "ack_gap_fault_overlap_s": "how much of that gap lies in the union of the fault windows (a fault without an end lasts to the gap's end)",
}
METRIC_COLUMNS = tuple(METRIC_DOCS)

# total == sum(parts), per row. The audit checks them from separate scans (states: send logs, classes:
# outcome table, records_read: topic records), so they also catch ids the audit mismatched.
IDENTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("planned", ("sent", UNSENT)),
    ("sent", STATES),
    ("acked", ("delivered", "lost", "acked_duplicated", "aborted_acked")),
    ("sent", SENT_OUTCOMES),
    ("aborted", ("aborted_clean", "aborted_visible")),
    ("records_read", ("delivered", "acked_duplicated", "indeterminate", "aborted_visible", "duplicates", UNEXPECTED)),
)

# A pipeline scenario's counts (`acklab.checker.pipeline_audit`); null in a producer scenario's row.
PIPELINE_COUNT_DOCS: Mapping[str, str] = {
    "input_acked": "input messages acknowledged into the input topic (not aborted): the pipeline's inputs",
    "processed_once": "inputs with exactly one committed output",
    "processed_duplicated": "inputs with more than one committed output",
    "processing_duplicates": "their extra committed outputs",
    "processed_lost": "inputs without a committed output whose offset the group committed",
    "unprocessed": "inputs without a committed output whose offset the group never committed by the end of the drain",
    "output_records": "committed output records read by the audit (read_committed)",
    "output_aborted": "output records of aborted transactions in the output topic's log (read_uncommitted sees them, read_committed does not)",
    "output_unexpected": "committed outputs of an input record that is not an acknowledged one (an id no acked input has, or an acked id from another input position: the load wrote it twice); informational",
    "output_unparsed": "committed output records whose value is not a processor's output",
    "output_aborted_visible": "committed-visible outputs of a transaction a processor aborted or that was open when its instance was killed",
    "zombie_writes": "committed outputs a zombie wrote under the generation it was paused in, from its paused transaction on",
    "redelivered": "input offsets consumed again (from the processors' logs: batches holding them, minus one)",
    "reprocessed": "input offsets whose output became durable again (from the processors' logs)",
    "poll_skips": "input offsets a processor skipped within one assignment (Jepsen's poll-skip)",
    "poll_backwards": "batches that went back within one assignment without a rewind (Jepsen's nonmonotonic poll)",
}
PIPELINE_COUNT_COLUMNS = tuple(PIPELINE_COUNT_DOCS)
PIPELINE_IDENTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("input_acked", ("processed_once", "processed_duplicated", "processed_lost", "unprocessed")),
)
