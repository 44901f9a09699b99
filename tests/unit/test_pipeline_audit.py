"""The pipeline audit on synthetic evidence: a clean eos history counts nothing, and each anomaly
planted on it is counted exactly, with the identity holding every time."""

from __future__ import annotations

import copy
from typing import Any

import pyarrow as pa
import pytest

from acklab.checker.pipeline_audit import PIPELINE_COUNTS, audit_pipeline
from acklab.store.contract import PIPELINE_IDENTITIES
from acklab.store.schemas import PIPELINE_OUTPUT_RECORDS

PARTITIONS, PER_PARTITION, BATCH = 3, 30, 10  # 90 inputs; each instance's batches hold 10 offsets of one partition


def _history() -> dict[str, Any]:
    """Instance 0 holds partitions 0 and 1, instance 1 partition 2 (generation 1); every input is
    processed once in eos transactions of one partition's 10 offsets, all committed."""
    acked = [(p * 1000 + o, p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
    events: dict[tuple[int, int], list[dict[str, Any]]] = {(0, 0): [], (1, 0): []}
    outputs: list[dict[str, Any]] = []
    txns = {0: 0, 1: 0}
    for instance, held in ((0, [0, 1]), (1, [2])):
        own = events[(instance, 0)]
        own.append({"ev": "assigned", "generation": 1, "partitions": held})
        for p in held:
            for first in range(0, PER_PARTITION, BATCH):
                txn = txns[instance]
                own.append({"ev": "batch", "txn": txn, "generation": 1, "count": BATCH, "inputs": {str(p): [first, first + BATCH - 1]}})
                for o in range(first, first + BATCH):
                    outputs.append(_output(p * 1000 + o, instance, 0, 1, p, o, txn))
                own.append({"ev": "committed", "txn": txn, "offsets": {str(p): first + BATCH}})
                txns[instance] += 1
    for key, own in events.items():
        for event in own:
            event.update(instance=key[0], incarnation=key[1], t=0.0)
    committed = {p: PER_PARTITION for p in range(PARTITIONS)}
    return {"acked": acked, "outputs": outputs, "events": events, "committed": committed, "style": "eos", "interventions": []}


def _output(id_: int, instance: int, incarnation: int, generation: int, partition: int, offset: int, txn: int) -> dict[str, Any]:
    return {"scenario": "s", "partition": partition, "offset": 0, "id": id_, "seq": 0, "instance": instance, "incarnation": incarnation,
            "generation": generation, "in_partition": partition, "in_offset": offset, "txn": txn, "committed": True}


def _audit(history: dict[str, Any]) -> dict[str, int]:
    return _audit_with_timeline(history)[0]


def _audit_with_timeline(history: dict[str, Any]) -> tuple[dict[str, int], dict[str, Any]]:
    acked = pa.table(
        {"id": [a[0] for a in history["acked"]], "partition": pa.array([a[1] for a in history["acked"]], pa.int32()), "offset": [a[2] for a in history["acked"]]},
        schema=pa.schema([("id", pa.int64()), ("partition", pa.int32()), ("offset", pa.int64())]),
    )
    outputs = pa.Table.from_pylist(history["outputs"], schema=PIPELINE_OUTPUT_RECORDS)
    counts, timeline = audit_pipeline(acked, outputs, history["events"], history["committed"], history["style"], history["interventions"])
    assert set(counts) == set(PIPELINE_COUNTS)
    for total, parts in PIPELINE_IDENTITIES:
        assert counts[total] == sum(counts[p] for p in parts), counts
    assert counts["output_records"] + counts["output_aborted"] == len(history["outputs"])
    return counts, timeline


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {name: value for name, value in counts.items() if value and name not in ("input_acked", "processed_once", "output_records")}


@pytest.fixture
def history() -> dict[str, Any]:
    return copy.deepcopy(_history())


def test_a_clean_eos_history_counts_nothing(history: dict[str, Any]) -> None:
    counts = _audit(history)
    assert counts["input_acked"] == counts["processed_once"] == counts["output_records"] == 90
    assert _nonzero(counts) == {}


def test_a_lost_input_and_an_unprocessed_one(history: dict[str, Any]) -> None:
    history["outputs"] = [o for o in history["outputs"] if o["id"] not in (5, 2029)]  # partition 0 offset 5, partition 2 offset 29
    history["committed"][2] = 29  # offset 29 of partition 2 was never committed
    assert _nonzero(_audit(history)) == {"processed_lost": 1, "unprocessed": 1}


def test_a_partition_never_committed_leaves_its_inputs_unprocessed(history: dict[str, Any]) -> None:
    history["outputs"] = [o for o in history["outputs"] if o["in_partition"] != 1]
    del history["committed"][1]
    assert _nonzero(_audit(history)) == {"unprocessed": PER_PARTITION}


def test_an_input_written_twice_by_the_load_is_not_a_processing_duplicate(history: dict[str, Any]) -> None:
    """Id 1003 is also at offset 30 of partition 1 (a non-idempotent retry; the send log acked offset 3):
    each copy processed once is one processed input and one unexpected output."""
    history["outputs"].append(_output(1003, 0, 0, 1, 1, 30, 3))
    history["outputs"][-1]["in_offset"] = 30
    counts = _audit(history)
    assert _nonzero(counts) == {"output_unexpected": 1}
    assert counts["processed_once"] == 90
    history["outputs"] = [o for o in history["outputs"] if not (o["id"] == 1003 and o["in_offset"] == 3)]  # only the other copy's output
    assert _nonzero(_audit(history)) == {"processed_lost": 1, "output_unexpected": 1}


def test_an_input_acked_without_an_offset_is_matched_by_id(history: dict[str, Any]) -> None:
    history["acked"] = [(i, p, None if i == 1003 else o) for i, p, o in history["acked"]]  # acks=0: no offset
    assert _nonzero(_audit(history)) == {}
    history["outputs"] = [o for o in history["outputs"] if o["id"] != 1003]
    assert _nonzero(_audit(history)) == {"processed_lost": 1}  # its partition has committed offsets


def test_duplicates_count_inputs_and_extra_copies(history: dict[str, Any]) -> None:
    twice = next(o for o in history["outputs"] if o["id"] == 3)
    thrice = next(o for o in history["outputs"] if o["id"] == 1007)
    history["outputs"] += [dict(twice), dict(thrice), dict(thrice)]
    counts = _audit(history)
    assert _nonzero(counts) == {"processed_duplicated": 2, "processing_duplicates": 3}
    assert counts["processed_once"] == 88


def test_output_of_an_aborted_transaction_visible(history: dict[str, Any]) -> None:
    own = history["events"][(1, 0)]
    own.append({"ev": "rewound", "offsets": {"2": 0}, "instance": 1, "incarnation": 0, "t": 0.0})
    own.append({"ev": "batch", "txn": 9, "generation": 1, "count": 2, "inputs": {"2": [0, 1]}, "instance": 1, "incarnation": 0, "t": 0.0})
    own.append({"ev": "aborted", "txn": 9, "error": "x", "instance": 1, "incarnation": 0, "t": 0.0})
    own.append({"ev": "rewound", "offsets": {"2": 30}, "instance": 1, "incarnation": 0, "t": 0.0})
    history["outputs"].append(_output(2000, 1, 0, 1, 2, 0, 9))
    counts = _audit(history)
    assert _nonzero(counts) == {"output_aborted_visible": 1, "processed_duplicated": 1, "processing_duplicates": 1, "redelivered": 2}


def test_output_of_the_transaction_open_at_a_kill_is_aborted_unless_it_had_committed(history: dict[str, Any]) -> None:
    history["interventions"] = [{"kind": "processor-kill", "instance": 0, "incarnation": 0, "txn": 2, "generation": 1}]
    history["events"][(0, 0)] = [e for e in history["events"][(0, 0)] if not (e["ev"] == "committed" and e["txn"] == 2)]
    history["events"][(0, 0)].append({"ev": "point", "txn": 2, "instance": 0, "incarnation": 0, "t": 0.0})
    counts = _audit(history)  # its 10 outputs are visible: the kill's transaction was never aborted
    assert counts["output_aborted_visible"] == BATCH
    history["style"] = "eos-naive"
    history["events"][(0, 0)].append({"ev": "txn_committed", "txn": 2, "instance": 0, "incarnation": 0, "t": 0.0})
    assert _audit(history)["output_aborted_visible"] == 0


def test_zombie_writes_are_those_from_its_paused_transaction_on(history: dict[str, Any]) -> None:
    # instance 1 was paused in txn 1 (generation 1): its txn 0 output is legitimate, txns 1 and 2 are zombie writes
    history["interventions"] = [{"kind": "zombie", "instance": 1, "incarnation": 0, "txn": 1, "generation": 1}]
    assert _nonzero(_audit(history)) == {"zombie_writes": 2 * BATCH}
    history["interventions"][0]["txn"] = 3  # paused after its last transaction: nothing written from it on
    assert _nonzero(_audit(history)) == {}
    history["interventions"][0].update(txn=0, generation=2)  # another generation: not its writes
    assert _nonzero(_audit(history)) == {}


def test_unexpected_and_unparsed_outputs(history: dict[str, Any]) -> None:
    history["outputs"].append(_output(77777, 0, 0, 1, 0, 0, 0))
    history["outputs"].append({**dict.fromkeys(PIPELINE_OUTPUT_RECORDS.names), "scenario": "s", "partition": 0, "offset": 9, "committed": True})
    assert _nonzero(_audit(history)) == {"output_unexpected": 1, "output_unparsed": 1}


def test_records_a_read_committed_reader_does_not_see_count_as_aborted_output_only(history: dict[str, Any]) -> None:
    history["outputs"] += [{**_output(2000, 1, 0, 1, 2, 0, 9), "committed": False}, {**_output(2001, 1, 0, 1, 2, 1, 9), "committed": False}]
    counts = _audit(history)
    assert _nonzero(counts) == {"output_aborted": 2}
    assert counts["output_records"] == 90


def test_poll_skips_and_backwards_and_a_rewind_that_is_neither(history: dict[str, Any]) -> None:
    own = history["events"][(1, 0)]
    batches = [e for e in own if e["ev"] == "batch"]
    batches[1]["inputs"] = {"2": [12, 19]}  # offsets 10 and 11 skipped
    batches[2]["inputs"] = {"2": [15, 29]}  # back from 20 to 15, no rewind
    counts = _audit(history)
    assert (counts["poll_skips"], counts["poll_backwards"]) == (2, 1)
    own.insert(own.index(batches[2]), {"ev": "rewound", "offsets": {"2": 15}, "instance": 1, "incarnation": 0, "t": 0.0})
    counts = _audit(history)
    assert (counts["poll_skips"], counts["poll_backwards"]) == (2, 0)


def test_eos_naive_killed_after_its_commit_reprocesses_exactly_its_duplicates(history: dict[str, Any]) -> None:
    """The planted bug: instance 0's transaction 2 (partition 0, offsets 20-29) committed its output,
    then it was killed before the consumer committed the offsets; instance 1 took partition 0 over
    and processed those ten again."""
    history["style"] = "eos-naive"
    for key, own in history["events"].items():
        for event in [e for e in own if e["ev"] == "committed"]:
            own.insert(own.index(event), {"ev": "txn_committed", "txn": event["txn"], "instance": key[0], "incarnation": key[1], "t": 0.0})
    history["interventions"] = [{"kind": "processor-kill", "instance": 0, "incarnation": 0, "txn": 2, "generation": 1}]
    zero = history["events"][(0, 0)]
    zero.remove(next(e for e in zero if e["ev"] == "committed" and e["txn"] == 2))
    one = history["events"][(1, 0)]
    one.append({"ev": "assigned", "generation": 2, "partitions": [0], "instance": 1, "incarnation": 0, "t": 0.0})
    one.append({"ev": "batch", "txn": 7, "generation": 2, "count": 10, "inputs": {"0": [20, 29]}, "instance": 1, "incarnation": 0, "t": 0.0})
    one.append({"ev": "txn_committed", "txn": 7, "instance": 1, "incarnation": 0, "t": 0.0})
    one.append({"ev": "committed", "txn": 7, "offsets": {"0": 30}, "instance": 1, "incarnation": 0, "t": 0.0})
    history["outputs"] += [_output(o, 1, 0, 2, 0, o, 7) for o in range(20, 30)]
    counts = _audit(history)
    assert counts["processing_duplicates"] == counts["reprocessed"] == counts["redelivered"] == BATCH
    assert _nonzero(counts) == {"processed_duplicated": BATCH, "processing_duplicates": BATCH, "redelivered": BATCH, "reprocessed": BATCH}


def test_at_least_once_and_at_most_once_count_durable_batches_by_their_style(history: dict[str, Any]) -> None:
    history["style"] = "at-most-once"
    history["interventions"] = [{"kind": "processor-kill", "instance": 0, "incarnation": 0, "txn": 2, "generation": 1}]
    history["outputs"] = [o for o in history["outputs"] if not (o["instance"] == 0 and o["txn"] == 2)]  # committed, never produced
    counts = _audit(history)
    assert _nonzero(counts) == {"processed_lost": BATCH}  # no transactions: nothing aborted


def test_at_least_once_killed_after_its_flush_reprocesses_its_duplicates(history: dict[str, Any]) -> None:
    """Instance 1's batch 1 (partition 2, offsets 10-19) was flushed, then it was killed at its point
    before committing; its next incarnation read from offset 10 again."""
    history["style"] = "at-least-once"
    history["interventions"] = [{"kind": "processor-kill", "instance": 1, "incarnation": 0, "txn": 1, "generation": 1}]
    one = history["events"][(1, 0)]
    del one[one.index(next(e for e in one if e["ev"] == "batch" and e["txn"] == 1)) + 1 :]
    one.append({"ev": "point", "txn": 1, "instance": 1, "incarnation": 0, "t": 0.0})
    history["outputs"] = [o for o in history["outputs"] if not (o["instance"] == 1 and o["txn"] == 2)]
    again: list[dict[str, Any]] = [{"ev": "assigned", "generation": 2, "partitions": [2]}]
    for txn, first in enumerate((10, 20)):
        again += [{"ev": "batch", "txn": txn, "generation": 2, "count": BATCH, "inputs": {"2": [first, first + BATCH - 1]}},
                  {"ev": "committed", "txn": txn, "offsets": {"2": first + BATCH}}]
        history["outputs"] += [_output(2000 + o, 1, 1, 2, 2, o, txn) for o in range(first, first + BATCH)]
    history["events"][(1, 1)] = [{**e, "instance": 1, "incarnation": 1, "t": 0.0} for e in again]
    counts, timeline = _audit_with_timeline(history)
    assert _nonzero(counts) == {"processed_duplicated": BATCH, "processing_duplicates": BATCH, "redelivered": BATCH, "reprocessed": BATCH}
    assert timeline["1.0"] | {"generations": None} == {
        "rebalances": 1, "generations": None, "batches": 2, "committed": 1, "txn_committed": 0, "aborted": 0, "points": 1,
        "errors": 0, "fatal_errors": 0, "overran": [], "stop": None,
    }
    assert (timeline["1.1"]["rebalances"], timeline["1.1"]["generations"], timeline["1.1"]["committed"]) == (1, [2], 2)
