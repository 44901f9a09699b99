"""One scenario's audit: its per-message outcome table and its matrix row, from its send log and the
records its topics hold (the definitions are in ``acklab.checker.audit``'s docstring).

Columnar numpy on one scenario's rows, which a Spark task holds whole: a message's rows meet by
sorting, not by a shuffle. Pure functions of Arrow tables; nothing here reads Kafka or files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from acklab.store.contract import SENT_OUTCOMES, STATES, UNEXPECTED, UNSENT
from acklab.store.schemas import OUTCOME_TABLE

LATENCY_PERCENTILES = (0.5, 0.95, 0.99)
_NO_STATE = -2  # below every state code: an id no send-log row names
_INVALID = -1  # a send-log state outside the contract
_ACKED, _FAILED, _UNKNOWN = range(len(STATES))


def _ints(column: pa.ChunkedArray | pa.Array, null: int) -> np.ndarray:
    """An integer column as int64 with nulls replaced by ``null``."""
    return pc.fill_null(column, null).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _valid(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.is_valid(column).to_numpy(zero_copy_only=False)


def _flags(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A boolean column with nulls as false."""
    return pc.fill_null(column, False).to_numpy(zero_copy_only=False)


def _starts(*keys: np.ndarray) -> np.ndarray:
    """Whether each row of rows sorted by ``keys`` starts a new run of equal keys."""
    start = np.zeros(len(keys[0]), dtype=bool)
    if len(start):
        start[0] = True
        for key in keys:
            start[1:] |= key[1:] != key[:-1]
    return start


def _late_first_copies(parsed: pa.Table, topics: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The records with an id (``parsed``, read from the topics of codes ``topics``), as (id,
    partition, offset, late): ``late`` marks a first copy (lowest offset of its id in its topic,
    partition and key) whose seq is below an earlier first copy's there."""
    ids, seqs = _ints(parsed["id"], 0), _ints(parsed["seq"], 0)
    # A topic and a partition as one number: the topics' partitions never reach 2**31.
    partitions, offsets = _ints(parsed["partition"], -1) + (topics << 32), _ints(parsed["offset"], -1)
    keys = _ints(pc.dictionary_encode(parsed["key"].combine_chunks()).indices, -1) if parsed.num_rows else np.zeros(0, np.int64)
    first = np.zeros(len(ids), dtype=bool)
    by_message = np.lexsort((offsets, ids, keys, partitions))
    first[by_message] = _starts(partitions[by_message], keys[by_message], ids[by_message])
    # In offset order within (partition, key): the largest seq rank of the first copies before each row.
    order = np.lexsort((offsets, keys, partitions))
    group = np.cumsum(_starts(partitions[order], keys[order])) - 1
    rank = np.unique(seqs, return_inverse=True)[1].reshape(-1)[order]
    span = len(ids) + 1  # group g's values lie in [g * span, g * span + len(ids)]
    floor = group * span
    running = np.maximum.accumulate(np.where(first[order], floor + rank + 1, floor))
    earlier = np.empty_like(running)
    earlier[:1] = -1
    earlier[1:] = running[:-1]
    late_sorted = first[order] & (earlier > floor) & (floor + rank + 1 < earlier)
    late = np.zeros(len(ids), dtype=bool)
    late[order] = late_sorted
    return ids, _ints(parsed["partition"], -1), offsets, late


def _max_at(size: int, index: np.ndarray, values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per target the largest of its ``values`` where ``present``, and whether it had one."""
    result = np.full(size, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(result, index[present], values[present])
    has = np.zeros(size, dtype=bool)
    has[index[present]] = True
    return result, has


def _topic_codes(own_topic: str | None, *columns: pa.ChunkedArray | pa.Array) -> list[np.ndarray]:
    """Each string column's topics as codes shared by all of them; a null is ``own_topic``, or -1
    (unknown) without one."""
    chunks: list[pa.Array] = []
    for column in columns:
        filled = pc.fill_null(column, own_topic) if own_topic is not None else column
        chunks.extend(filled.chunks if isinstance(filled, pa.ChunkedArray) else [filled])
    codes = _ints(pc.dictionary_encode(pa.chunked_array(chunks, pa.string())).combine_chunks().indices, -1)
    bounds = np.cumsum([0, *(len(column) for column in columns)])
    return [codes[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]


def outcome_table(scenario: str, send_log: pa.Table, records: pa.Table, own_topic: str | None = None) -> pa.Table:
    """``OUTCOME_TABLE`` rows of one scenario: one per id its sent send-log rows (state not
    ``unsent``) or its records name; rows of one id in the send log are merged into one message.
    ``own_topic``: the scenario's own topic, which a null ``topic`` in either table stands for
    (without it a null topic is unknown, and never misdirected)."""
    state = send_log["state"]
    sent_log = send_log.filter(pc.fill_null(pc.not_equal(state, UNSENT), False))
    sent_ids = _ints(sent_log["id"], -1)
    code = np.full(len(sent_ids), _INVALID, dtype=np.int64)
    for index, name in enumerate(STATES):
        code[_flags(pc.equal(sent_log["state"], name))] = index
    parsed = records.filter(pc.is_valid(records["id"]))
    sent_topics, copy_topics = _topic_codes(own_topic, sent_log["topic"], parsed["topic"])
    copy_ids, copy_partitions, copy_offsets, late = _late_first_copies(parsed, copy_topics)

    ids, inverse = np.unique(np.concatenate([sent_ids, copy_ids]), return_inverse=True)
    inverse = inverse.reshape(-1)
    at_sent, at_copy = inverse[: len(sent_ids)], inverse[len(sent_ids) :]
    n = len(ids)
    is_sent = np.zeros(n, dtype=bool)
    is_sent[at_sent] = True
    state_code = np.full(n, _NO_STATE, dtype=np.int64)
    np.maximum.at(state_code, at_sent, code)
    aborted = np.zeros(n, dtype=bool)
    np.logical_or.at(aborted, at_sent, _flags(sent_log["aborted"]))
    partition, has_partition = _max_at(n, at_sent, _ints(sent_log["partition"], 0), _valid(sent_log["partition"]))
    offset, has_offset = _max_at(n, at_sent, _ints(sent_log["offset"], 0), _valid(sent_log["offset"]))
    expected, has_expected = _max_at(n, at_sent, _ints(sent_log["expected_partition"], 0), _valid(sent_log["expected_partition"]))
    copies = np.bincount(at_copy, minlength=n).astype(np.int64)
    # The topic it was sent to (-1: unknown); a copy read from another is misdirected.
    sent_topic, _ = _max_at(n, at_sent, sent_topics, sent_topics >= 0)
    sent_topic[~is_sent] = -1
    wrong_topic = (copy_topics >= 0) & (sent_topic[at_copy] >= 0) & (copy_topics != sent_topic[at_copy])
    misdirected = np.zeros(n, dtype=bool)
    np.logical_or.at(misdirected, at_copy, wrong_topic)
    reordered = np.zeros(n, dtype=bool)
    np.logical_or.at(reordered, at_copy, late)

    # A copy at a location the send log acked it at: sort the sent rows' and the copies' locations
    # together. A sent row's unknown location (null, or -1) never equals a copy's.
    location_topic = np.concatenate([sent_topics, copy_topics])
    location_partition = np.concatenate([_ints(sent_log["partition"], -1), copy_partitions])
    location_offset = np.concatenate([_ints(sent_log["offset"], -1), copy_offsets])
    from_log = np.arange(len(inverse)) < len(sent_ids)
    order = np.lexsort((location_offset, location_partition, location_topic, inverse))
    run = np.cumsum(_starts(inverse[order], location_topic[order], location_partition[order], location_offset[order])) - 1
    run_has_log = np.zeros(run[-1] + 1 if len(run) else 0, dtype=bool)
    run_has_copy = np.zeros_like(run_has_log)
    np.logical_or.at(run_has_log, run, from_log[order])
    np.logical_or.at(run_has_copy, run, ~from_log[order])
    at_ack = np.zeros(n, dtype=bool)
    np.logical_or.at(at_ack, inverse[order], (run_has_log & run_has_copy)[run])

    acked, failed, unknown = (state_code == c for c in (_ACKED, _FAILED, _UNKNOWN))
    outcome = np.select(
        [
            ~is_sent,
            aborted & (copies > 0),
            aborted,
            acked & (copies == 0),
            acked & (copies == 1),
            acked,
            (failed | unknown) & (copies > 0),
            failed,
            unknown,
        ],
        [UNEXPECTED, "aborted_visible", "aborted_clean", "lost", "delivered", "acked_duplicated", "indeterminate", "failed_clean", "unknown_absent"],
        "invalid_state",  # a state outside the contract has no outcome; the identities then report it
    )
    # Misrouted: acked into, or stored (in the topic it was sent to) in, a partition other than the one its key maps to.
    stored_elsewhere = np.zeros(n, dtype=bool)
    np.logical_or.at(stored_elsewhere, at_copy, has_expected[at_copy] & (copy_partitions != expected[at_copy]) & ~wrong_topic)
    misrouted = acked & has_expected & ((has_partition & (partition != expected)) | stored_elsewhere)
    offset_mismatch = acked & has_offset & (offset >= 0) & has_partition & (copies > 0) & ~at_ack & ~misrouted & ~misdirected
    named_state = np.array([*STATES, None], dtype=object)[np.where(state_code >= 0, state_code, len(STATES))]
    columns = {
        "scenario": pa.array([scenario] * n, pa.string()),
        "id": pa.array(ids),
        "state": pa.array(named_state, pa.string()),
        "aborted": pa.array(aborted, mask=~is_sent),
        "partition": pa.array(partition.astype(np.int32), mask=~has_partition),
        "offset": pa.array(offset, mask=~has_offset),
        "expected_partition": pa.array(expected.astype(np.int32), mask=~has_expected),
        "copies": pa.array(copies),
        "outcome": pa.array(outcome, pa.string()),
        "misrouted": pa.array(misrouted),
        "offset_mismatch": pa.array(offset_mismatch),
        "reordered": pa.array(reordered),
        "misdirected": pa.array(misdirected & is_sent),
    }
    return pa.Table.from_arrays([columns[field.name] for field in OUTCOME_TABLE], schema=OUTCOME_TABLE)


def round_half_up(values: np.ndarray) -> np.ndarray:
    """Doubles rounded to the nearest integer, halves away from zero (Spark's ``round``)."""
    floor = np.floor(values)
    fraction = values - floor
    return floor + np.where(values >= 0, fraction >= 0.5, fraction > 0.5)


def exact_percentile(ascending: np.ndarray, fraction: float) -> float | None:
    """The ``fraction`` percentile of ascending integers: linear interpolation between the closest
    ranks in the arithmetic of Spark's ``percentile()``; None for no values."""
    if not len(ascending):
        return None
    position = (len(ascending) - 1) * fraction
    lower, higher = math.floor(position), math.ceil(position)
    low, high = float(ascending[lower]), float(ascending[higher])
    if lower == higher or low == high:
        return low
    return (higher - position) * low + (position - lower) * high


def longest_ack_gap(acks: np.ndarray, start: float | None) -> tuple[float, float] | None:
    """The longest interval without an ack, (start, end): from ``start`` (the first send) to the first
    ack and between consecutive acks; ties go to the earliest. None without acks."""
    if not len(acks):
        return None
    ends = np.sort(acks)
    starts = np.concatenate([[start], ends[:-1]]) if start is not None else ends[:-1]
    ends = ends if start is not None else ends[1:]
    if not len(ends):  # one ack and no first send
        return None
    best = np.lexsort((ends, starts, starts - ends))[0]
    return float(starts[best]), float(ends[best])


def fault_overlap(windows: Sequence[tuple[float, float]], gap: tuple[float, float]) -> float:
    """How much of ``gap`` lies in the disjoint ``windows``, summed in their order."""
    total = 0.0
    for start, end in windows:
        total = total + max(0.0, min(end, gap[1]) - max(start, gap[0]))
    return total


def matrix_row(send_log: pa.Table, records: pa.Table, outcomes: pa.Table, windows: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """One scenario's counts and metrics (``COUNT_COLUMNS``, ``METRIC_COLUMNS``) from its whole send log
    (unsent rows included), its records and its outcome table."""
    state = send_log["state"]
    is_state = {name: _flags(pc.equal(state, name)) for name in (*STATES, UNSENT)}
    acked, aborted = is_state["acked"], _flags(send_log["aborted"])
    row: dict[str, Any] = {
        "planned": send_log.num_rows,
        "sent": int(_flags(pc.not_equal(state, UNSENT)).sum()),
        **{name: int(mask.sum()) for name, mask in is_state.items()},
        "refused": int(_flags(send_log["refused"]).sum()),
        "fatal": int(_flags(send_log["fatal"]).sum()),
        "aborted": int(aborted.sum()),
        "aborted_acked": int((acked & aborted).sum()),
    }
    outcome, copies = outcomes["outcome"].to_numpy(zero_copy_only=False), _ints(outcomes["copies"], 0)
    row |= {name: int((outcome == name).sum()) for name in SENT_OUTCOMES}
    duplicated = (outcome != UNEXPECTED) & (copies > 1)
    row |= {
        "duplicated": int(duplicated.sum()),
        "duplicates": int((copies[duplicated] - 1).sum()),
        **{name: int(_flags(outcomes[name]).sum()) for name in ("reordered", "misrouted", "offset_mismatch", "misdirected")},
        "records_read": records.num_rows,
        UNEXPECTED: int(records["id"].null_count) + int(copies[outcome == UNEXPECTED].sum()),
    }

    send_ts, ack_ts = send_log["send_ts"], send_log["ack_ts"]
    first_send = pc.min(send_ts).as_py()
    timed = acked & _valid(ack_ts)
    ack_times = pc.fill_null(ack_ts, 0.0).to_numpy(zero_copy_only=False)
    acks = ack_times[timed]
    with_latency = timed & _valid(send_ts)
    sends = pc.fill_null(send_ts, 0.0).to_numpy(zero_copy_only=False)
    latencies = np.sort(round_half_up((ack_times - sends)[with_latency] * 1e6).astype(np.int64))
    last_ack = float(acks.max()) if len(acks) else None
    span = None if last_ack is None or first_send is None else last_ack - first_send
    gap = longest_ack_gap(acks, first_send)
    row |= {
        **{
            name: None if (p := exact_percentile(latencies, fraction)) is None else p / 1000
            for fraction, name in zip(LATENCY_PERCENTILES, ("ack_latency_p50_ms", "ack_latency_p95_ms", "ack_latency_p99_ms"), strict=True)
        },
        "ack_latency_max_ms": int(latencies[-1]) / 1000 if len(latencies) else None,
        "acked_per_s": int(acked.sum()) / span if span else None,
        "longest_ack_gap_s": None if gap is None else gap[1] - gap[0],
        "ack_gap_fault_overlap_s": None if gap is None else fault_overlap(windows, gap),
    }
    return row

