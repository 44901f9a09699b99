"""The audit of a pipeline scenario (the *checker* seam, for processors): every acknowledged input
against the committed output (read_committed) and the processors' own logs. Pure: Arrow tables
and log events in, exact counts out; nothing here reads Kafka or files
(`acklab.checker.pipeline_evidence` gathers the evidence).

An output is the copy of an acknowledged input when it carries the input's id and was produced
from the input's acknowledged position (its `in_partition`, `in_offset`); an input acknowledged
without an offset (acks=0) is matched by id alone. Matching the position as well keeps an input the
load wrote twice (a non-idempotent input profile's retry: one id at two offsets, each processed
once) out of the processing duplicates. Per acknowledged input, with `copies` = its committed
copies (exclusive):

=====================  ======================================================================
processed_once         copies == 1
processed_duplicated   copies > 1 (`processing_duplicates`: their extra copies)
processed_lost         copies == 0, and the group committed its partition past its offset
unprocessed            copies == 0, and its offset was never committed (the evidence is short)
=====================  ======================================================================

so `input_acked = processed_once + processed_duplicated + processed_lost + unprocessed`, and
`output_records = (copies of acked inputs) + output_unexpected + output_unparsed`. An input
acknowledged without an offset and without output counts as lost once its partition has any
committed offset (its own offset is unknown).

Of the committed output:

- `output_aborted`: records of the output topic's log a read_committed reader does not see (output
  of aborted transactions: the evidence that a kill or a fence really aborted one).
- `output_unparsed`: a value that is not a processor's output; `output_unexpected`: an output of
  an input record that is not an acknowledged one: an id no acknowledged input has (an input whose
  write failed yet was stored), or an acknowledged id from another input position (the load wrote
  it twice). Informational: not a processing violation.
- `output_aborted_visible`: outputs of a transaction the processor aborted (its `aborted` event),
  or of the transaction open at the point of an instance killed there (eos: its output was not
  committed; the restart with its `transactional.id` aborts it). eos-naive's transaction at its
  point had committed (`txn_committed`): not aborted. A transaction whose end failed fatally
  without an abort has an unknown outcome and is not counted. Styles without transactions: 0.
- `zombie_writes`: outputs of a zombie (a `zombie` intervention's instance and incarnation) under
  the generation it was paused in, from the transaction it was paused in on: what it wrote after
  its group had moved past it.

From the processors' logs alone (each `batch` names the input offsets it holds; the input topic is
not transactional, so a batch's span of a partition is every offset in it):

- `redelivered`: input offsets consumed again: over every offset, the batches holding it, minus one.
- `reprocessed`: input offsets whose output became durable again: over every offset, its durable
  batches minus one. Durable: eos, a batch whose `committed` was logged; eos-naive, whose
  `txn_committed` was; at-least-once, every batch (it flushes before its point); at-most-once, a
  batch committed and not killed at its point (it produces after it). The planted eos-naive bug
  must show `processing_duplicates == reprocessed` (when every input it read was acknowledged).
  Upper bounds where a client's sends fail: the Java driver's at-least-once batch whose sends
  failed (`error`, then `rewound`, not committed) and at-most-once batch whose sends failed after
  its commit are counted durable though only part of their output was written.
- `poll_skips` / `poll_backwards`: within one incarnation and one assignment, a batch of a
  partition starting past the offset after the last batch of it (offsets skipped, summed) or at or
  before it without a rewind (batches).

Jepsen's Kafka workload (`jepsen/src/jepsen/tests/kafka.clj`) checks, and here: lost write →
`processed_lost`; duplicates → `processed_duplicated`; aborted read → `output_aborted_visible`;
poll-skip → `poll_skips`; nonmonotonic poll → `poll_backwards`. Left out: inconsistent offsets
(Kafka assigns output offsets; the producer path checks `offset_mismatch` against the acks);
precommitted reads and G0/G1 transaction cycles (no reader of uncommitted output, and a processor's
transactions write one topic in one order: no cycle to find without a second writer); nonmonotonic
sends (the input producer's order is the producer audit's `reordered`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PIPELINE_COUNTS: tuple[str, ...] = (
    "input_acked", "processed_once", "processed_duplicated", "processing_duplicates", "processed_lost", "unprocessed", "output_records",
    "output_aborted", "output_unexpected", "output_unparsed", "output_aborted_visible", "zombie_writes", "redelivered", "reprocessed", "poll_skips",
    "poll_backwards",
)
TRANSACTIONAL = frozenset({"eos", "eos-naive"})
Events = Mapping[tuple[int, int], Sequence[Mapping[str, Any]]]


def _ints(column: pa.ChunkedArray | pa.Array, null: int = -1) -> np.ndarray:
    return pc.fill_null(column, null).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def audit_pipeline(
    acked: pa.Table, outputs: pa.Table, events: Events, committed: Mapping[int, int], style: str, interventions: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, int], dict[str, Any]]:
    """The pipeline counts (`PIPELINE_COUNTS`) and the consumer-side timeline of one scenario.

    `acked`: (id, partition, offset) of the acknowledged inputs; `outputs`: the output topic's
    records (`acklab.store.schemas.PIPELINE_OUTPUT_RECORDS`), those a read_committed reader sees
    marked `committed` (the others count in `output_aborted` only); `events`: each incarnation's log
    events by (instance, incarnation); `committed`: the group's committed offset per input partition
    after the drain; `interventions`: the processor faults' (`acklab.store.runs.Intervention` dumps)."""
    ids, partitions, offsets = _ints(acked["id"]), _ints(acked["partition"]), _ints(acked["offset"])
    aborted_in_log = outputs.num_rows
    outputs = outputs.filter(pc.fill_null(outputs["committed"], False))
    aborted_in_log -= outputs.num_rows
    parsed = outputs.filter(pc.is_valid(outputs["id"]))
    out_ids = _ints(parsed["id"])
    if len(ids):  # ids are unique in a send log: each output meets at most one acked input
        order = np.argsort(ids, kind="stable")
        at = order[np.minimum(np.searchsorted(ids[order], out_ids), len(ids) - 1)]
        placed = offsets[at] >= 0  # its input's acknowledged position is known
        known = (ids[at] == out_ids) & (
            ~placed | ((_ints(parsed["in_partition"]) == partitions[at]) & (_ints(parsed["in_offset"]) == offsets[at]))
        )
        copies = np.bincount(at[known], minlength=len(ids))
        ends = np.array([committed.get(int(p), -1) for p in partitions], dtype=np.int64)
    else:
        known, copies, ends = np.zeros(len(out_ids), dtype=bool), np.zeros(0, np.int64), np.zeros(0, np.int64)
    absent = copies == 0
    counts = {
        "input_acked": len(ids),
        "processed_once": int(np.sum(copies == 1)),
        "processed_duplicated": int(np.sum(copies > 1)),
        "processing_duplicates": int(np.sum(copies[copies > 1] - 1)),
        "processed_lost": int(np.sum(absent & (offsets < ends))),
        "unprocessed": int(np.sum(absent & (offsets >= ends))),
        "output_records": outputs.num_rows,
        "output_aborted": aborted_in_log,
        "output_unexpected": int(np.sum(~known)),
        "output_unparsed": outputs.num_rows - parsed.num_rows,
    }
    keys = list(zip(_ints(parsed["instance"]), _ints(parsed["incarnation"]), _ints(parsed["txn"]), strict=True))
    aborted = aborted_transactions(events, style, interventions)
    counts["output_aborted_visible"] = sum(1 for key in keys if key in aborted)
    generations = _ints(parsed["generation"])
    zombie = 0
    for hit in interventions:
        if hit["kind"] != "zombie":
            continue
        zombie += sum(
            1 for (i, n, t), g in zip(keys, generations, strict=True)
            if (i, n, g) == (hit["instance"], hit["incarnation"], hit["generation"]) and t >= hit["txn"]
        )
    counts["zombie_writes"] = zombie
    counts["redelivered"], counts["reprocessed"] = _again(events, style, interventions)
    counts["poll_skips"], counts["poll_backwards"] = _poll_order(events)
    return counts, timeline(events)


def aborted_transactions(events: Events, style: str, interventions: Sequence[Mapping[str, Any]]) -> set[tuple[int, int, int]]:
    """(instance, incarnation, txn) of the transactions known aborted (see the module docstring)."""
    if style not in TRANSACTIONAL:
        return set()
    found = {(e["instance"], e["incarnation"], e["txn"]) for own in events.values() for e in own if e["ev"] == "aborted"}
    for hit in interventions:
        if hit["kind"] != "processor-kill":
            continue
        key = (hit["instance"], hit["incarnation"], hit["txn"])
        own = events.get(key[:2], ())
        if not any(e["ev"] in ("committed", "txn_committed") and e.get("txn") == key[2] for e in own):
            found.add(key)
    return found


def _spans(event: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """(partition, first offset, last offset) of a `batch` event's inputs."""
    return [(int(p), int(span[0]), int(span[1])) for p, span in event["inputs"].items()]


def _durable(own: Sequence[Mapping[str, Any]], style: str, killed: set[int]) -> set[int]:
    """The txns (batches) of one incarnation whose output became durable."""
    batches = {e["txn"] for e in own if e["ev"] == "batch"}
    if style == "eos":
        return {e["txn"] for e in own if e["ev"] == "committed"}
    if style == "eos-naive":
        return {e["txn"] for e in own if e["ev"] == "txn_committed"}
    if style == "at-most-once":
        return {e["txn"] for e in own if e["ev"] == "committed"} - killed
    return batches  # at-least-once: flushed before its point


def _again(events: Events, style: str, interventions: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(redelivered, reprocessed): input offsets batched again / made durable again."""
    batched: dict[int, Counter[int]] = defaultdict(Counter)
    durable: dict[int, Counter[int]] = defaultdict(Counter)
    for key, own in events.items():
        killed = {h["txn"] for h in interventions if h["kind"] == "processor-kill" and (h["instance"], h["incarnation"]) == key}
        made = _durable(own, style, killed)
        for event in own:
            if event["ev"] != "batch":
                continue
            for partition, first, last in _spans(event):
                for offset in range(first, last + 1):
                    batched[partition][offset] += 1
                    if event["txn"] in made:
                        durable[partition][offset] += 1

    def extra(table: Mapping[int, Counter[int]]) -> int:
        return sum(times - 1 for counter in table.values() for times in counter.values() if times > 1)

    return extra(batched), extra(durable)


def _poll_order(events: Events) -> tuple[int, int]:
    """(offsets skipped, batches going backwards) within each incarnation's assignments."""
    skips = backwards = 0
    for own in events.values():
        expected: dict[int, int] = {}
        for event in own:
            kind = event["ev"]
            if kind in ("assigned", "revoked"):
                expected.clear()
            elif kind == "rewound":
                expected = {int(p): int(o) for p, o in event["offsets"].items()}
            elif kind == "batch":
                for partition, first, last in _spans(event):
                    if partition in expected:
                        if first > expected[partition]:
                            skips += first - expected[partition]
                        elif first < expected[partition]:
                            backwards += 1
                    expected[partition] = last + 1
    return skips, backwards


def timeline(events: Events) -> dict[str, Any]:
    """Per `<instance>.<incarnation>`: rebalances, generations seen, batches (transactions begun),
    offsets committed (`committed`; eos: with its transaction), eos-naive's transactions committed
    (`txn_committed`), aborted, points reached, errors (fatal ones apart), the client calls that
    overran their timeout, and how it stopped."""
    found: dict[str, Any] = {}
    for (instance, incarnation), own in sorted(events.items()):
        kinds = Counter(e["ev"] for e in own)
        found[f"{instance}.{incarnation}"] = {
            "rebalances": kinds["assigned"],
            "generations": sorted({e["generation"] for e in own if e["ev"] in ("assigned", "batch") and e.get("generation") is not None}),
            "batches": kinds["batch"],
            "committed": kinds["committed"],
            "txn_committed": kinds["txn_committed"],
            "aborted": kinds["aborted"],
            "points": kinds["point"],
            "errors": kinds["error"],
            "fatal_errors": sum(1 for e in own if e["ev"] == "error" and e.get("fatal")),
            "overran": [e["call"] for e in own if e["ev"] == "overran"],
            "stop": next((e.get("reason") for e in own if e["ev"] == "stop"), None),
        }
    return found


def timeline_json(events: Events) -> str:
    return json.dumps(timeline(events), separators=(",", ":"))
