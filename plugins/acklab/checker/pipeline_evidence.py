"""A pipeline scenario's evidence as the pure audit (`acklab.checker.pipeline_audit`) takes it: the
acked inputs from the send log, the processors' logs from their folder, the interventions of its
processor faults from the fault timeline. Reads files; computes nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from acklab.store.runs import RunDir, ScenarioEntry
from acklab.workload.processing import read_log

LOG_NAME = re.compile(r"^processor-(\d+)\.(\d+)\.jsonl$")


def acked_inputs(send_log: pa.Table) -> pa.Table:
    """(id, partition, offset) of the inputs acknowledged into the input topic (not aborted)."""
    acked = send_log.filter(pc.and_(pc.equal(send_log["state"], "acked"), pc.invert(pc.fill_null(send_log["aborted"], False))))
    return acked.select(["id", "partition", "offset"])


def processor_events(folder: Path) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Every processor incarnation's log events, by (instance, incarnation), each event with its
    `instance` and `incarnation` added."""
    events: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("processor-*.jsonl")):
        match = LOG_NAME.match(path.name)
        if match is None:
            continue
        key = (int(match[1]), int(match[2]))
        events[key] = [{**event, "instance": key[0], "incarnation": key[1]} for event in read_log(path)]
    return events


def interventions(scenario: ScenarioEntry) -> list[dict[str, Any]]:
    """The processor faults' interventions on this scenario's pipeline (its input topic's)."""
    return [
        intervention.model_dump()
        for record in scenario.fault_timeline
        for intervention in record.interventions
        if intervention.topic == scenario.topic
    ]


def logs_folder(run: RunDir, scenario: ScenarioEntry) -> Path:
    assert scenario.pipeline is not None
    return (run.root / scenario.pipeline.logs).resolve()
