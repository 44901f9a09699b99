"""The delivery matrix's contract, shared by the Spark job (spark/delivery_matrix.py, which writes
the matrix) and the Great Expectations verdict (which validates it). Pure Python: the Spark driver
imports it without the rest of acklab."""

from __future__ import annotations

COUNT_COLUMNS = (
    "planned",
    "sent",
    "unsent",
    "refused",
    "fatal",
    "acked",
    "failed",
    "unknown",
    "records_read",
    "delivered",
    "lost",
    "duplicated",
    "duplicates",
    "acked_duplicated",
    "failed_clean",
    "indeterminate",
    "unknown_absent",
    "unexpected",
    "reordered",
    "misrouted",
    "offset_mismatch",
    "aborted",
    "aborted_acked",
    "aborted_clean",
    "aborted_visible",
)
METRIC_COLUMNS = (
    "ack_latency_p50_ms",
    "ack_latency_p95_ms",
    "ack_latency_p99_ms",
    "ack_latency_max_ms",
    "acked_per_s",
    "longest_ack_gap_s",
    "ack_gap_fault_overlap_s",
)
# A sent message's final state in the send log, and its outcome class in the audit (ids found only
# in the topic are "unexpected", not a class of a sent message).
STATES = ("acked", "failed", "unknown")
UNSENT = "unsent"  # a planned message never handed to produce(): the load stopped early
SENT_OUTCOMES = (
    "delivered",
    "lost",
    "acked_duplicated",
    "failed_clean",
    "indeterminate",
    "unknown_absent",
    "aborted_clean",
    "aborted_visible",
)
# total == sum(parts), per row. The Spark job checks them from separate scans (states: send logs,
# classes: outcome table, records_read: topic records), so they also catch ids the audit mismatched.
IDENTITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("planned", ("sent", UNSENT)),
    ("sent", STATES),
    ("acked", ("delivered", "lost", "acked_duplicated", "aborted_acked")),
    ("sent", SENT_OUTCOMES),
    ("aborted", ("aborted_clean", "aborted_visible")),
    (
        "records_read",
        ("delivered", "acked_duplicated", "indeterminate", "aborted_visible", "duplicates", "unexpected"),
    ),
)
