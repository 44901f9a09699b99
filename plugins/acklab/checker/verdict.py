"""The verdict rules: what a delivery matrix row's status is, from its counters, its manifest entry
(the expectations the guarantee model recorded at plan time) and the expectations it failed.

Pure: no Great Expectations here. The suites that apply the model's expectations are built by
`acklab.checker.gx_suites`, live in the project of `acklab.checker.gx_project`, and are run and
their results read by `acklab.checker.gx_validation`, which hands each row's failed expectations
(`FailedExpectation`) to `judge`.

Status of a row: fail if the producer raised a fatal error the model rules out (a fatal error is a
verdict even when it leaves messages of unknown outcome); incomplete if its evidence is (the manifest says so, or an evidence expectation
failed: the load did not send what it planned); fail if an integrity or guarantee expectation
failed; incomplete if its fault took no effect (the manifest says so); fail if an availability
expectation failed; incomplete ("fault ineffective") if an efficacy expectation failed; else pass.
Every scenario of the manifest must have a matrix row (`pair_rows`).

The run's negative controls (the manifest entries marked `control`: each a planted anomaly) are
judged like any row and each must fail with the checker's count equal to what was planted (e.g.
`lost` equal to `planted_lost`: `ControlCheck`); they do not count in the run's status, which is
`invalid` if a control was not caught so, else the worst status of the other rows (`overall`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from acklab.model.claims import Expectation, Kind
from acklab.model.classes import Guarantee
from acklab.nemesis.faults import PLANTED_LOSS, PLANTING
from acklab.store.contract import COUNT_COLUMNS, PIPELINE_COUNT_COLUMNS
from acklab.store.runs import Manifest

RowStatus = Literal["pass", "fail", "incomplete"]  # a row's verdict
Status = RowStatus | Literal["invalid"]  # a run's: invalid when a negative control was not caught
STATUS_ORDER: tuple[Status, ...] = ("invalid", "fail", "incomplete", "pass")  # worst first


def overall(statuses: Sequence[str] | set[str]) -> Status:
    """The status of a whole made of parts with `statuses`: the worst of them (pass if none)."""
    return next((status for status in STATUS_ORDER if status in statuses), "pass")


INTEGRITY = "integrity"  # the kind of the integrity suite's expectations (structural checks, whatever the guarantee)
SUMMARY_COUNTS = ("planned", "sent", "acked", "failed", "lost", "duplicates", "reordered")
REQUIRED_COLUMNS = ("scenario", "guarantee", "fault", "evidence_complete", "fault_effective")


class GuaranteeViolation(Exception):
    """A matrix did not pass: some scenario failed its expectations or lacks evidence."""


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation a scenario's row did not meet."""

    suite: str
    kind: str  # integrity, or a model Kind
    expects: str  # e.g. "lost == 0"
    column: str | None
    observed: Any

    def describe(self) -> str:
        """``suite: expects, observed value``."""
        return f"{self.suite}: {self.expects}, observed {show(self.observed)}"


@dataclass(frozen=True)
class ScenarioVerdict:
    """The verdict on one matrix row."""

    scenario: str
    guarantee: str
    status: RowStatus
    failed: tuple[FailedExpectation, ...]
    counts: Mapping[str, Any]
    reason: str | None = None
    fatal_error: str | None = None  # the producer's fatal error, named whenever there was one
    hanging_detail: str | None = None  # the hanging transactions, named whenever there were some
    control: bool = False  # the run's negative control (`ControlCheck`)
    fault: str | None = None  # the row's fault (its schedule's label)

    def why(self) -> list[str]:
        """Why the row is not a pass: its reason, each failed expectation, a fatal error, hanging transactions."""
        why = [self.reason] if self.reason else []
        why += [failure.describe() for failure in self.failed]
        if self.fatal_error:
            why.append(f"fatal producer error ({self.fatal_error})")
        if self.hanging_detail:
            why.append(f"hanging transaction ({self.hanging_detail})")
        return why

    def summary_line(self) -> str:
        """One line: status, scenario, class, why it is not a pass, and the key counts."""
        parts = [f"{self.status.upper()} {self.scenario} [{self.guarantee}]"]
        if why := self.why():
            parts.append("; ".join(why))
        counts = ", ".join(f"{name}={show(self.counts.get(name))}" for name in SUMMARY_COUNTS)
        parts.append(f"({counts})")
        return " ".join(parts)


PIPELINE_PLANTED = ("reprocessed", "processing_duplicates", "the processors re-processed {planted} inputs, the checker counted {counted} duplicated outputs")


@dataclass(frozen=True)
class ControlCheck:
    """Whether the checker caught a negative control: the control row is red (`status` fail) with
    the checker's count (`counted`) equal to what was planted (`planted`, at least one). Per planting
    fault (`acklab.nemesis.faults.Plants`): e.g. records the proxy swallowed against records counted
    lost, records the broker appended a second time against duplicates counted; the pipeline control
    (`PIPELINE_PLANTED`):
    inputs its processors' logs say they re-processed against the extra committed outputs counted
    (`processing_duplicates`). `sentence` compares the two."""

    scenario: str
    status: RowStatus
    planted: int | None
    counted: int | None
    sentence: str
    reason: str | None = None

    @classmethod
    def of(cls, scenario: ScenarioVerdict) -> ControlCheck:
        counts = scenario.counts
        pipeline = counts.get("input_acked") is not None
        if pipeline:
            planted, counted, sentence = PIPELINE_PLANTED
        else:
            plants = PLANTING.get(scenario.fault or "", PLANTING[PLANTED_LOSS])
            planted, counted, sentence = plants.column, plants.counted, plants.sentence
        return cls(scenario.scenario, scenario.status, counts.get(planted), counts.get(counted), sentence, scenario.reason)

    @property
    def caught(self) -> bool:
        return self.status == "fail" and bool(self.planted) and self.counted == self.planted

    def line(self) -> str:
        numbers = self.sentence.format(planted=show(self.planted), counted=show(self.counted))
        if self.caught:
            return f"negative control caught: {numbers} ({self.scenario} red, as it must be)"
        why = f"; {self.reason}" if self.reason else ""
        return f"INVALID: the negative control was not caught exactly: {numbers}, its row {self.status}{why}; no verdict of this run can be trusted"


NO_CONTROL = "no negative control in this run (negative_control false): nothing shows that it could go red"


@dataclass(frozen=True)
class Verdict:
    """The verdict on a whole matrix, with the Data Docs page that shows the evidence."""

    run_name: str
    scenarios: tuple[ScenarioVerdict, ...]
    data_docs_index: Path | None

    @property
    def checked(self) -> tuple[ScenarioVerdict, ...]:
        """The rows of the matrix proper (all but the negative control)."""
        return tuple(scenario for scenario in self.scenarios if not scenario.control)

    @property
    def controls(self) -> tuple[ControlCheck, ...]:
        return tuple(ControlCheck.of(s) for s in self.scenarios if s.control)

    @property
    def status(self) -> Status:
        """invalid if a negative control was not caught, else the worst status of the other rows."""
        if any(not control.caught for control in self.controls):
            return "invalid"
        return overall({scenario.status for scenario in self.checked})

    def control_lines(self) -> list[str]:
        """What the negative control showed (or that there was none)."""
        return [control.line() for control in self.controls] or [NO_CONTROL]

    def summary_lines(self) -> list[str]:
        """The negative control first, then one line per other scenario, in matrix order."""
        return [*self.control_lines(), *(scenario.summary_line() for scenario in self.checked)]

    def failure(self) -> str:
        """Why the run did not pass: the control if it was not caught, every scenario that did not pass ("" if it passed)."""
        if self.status == "pass":
            return ""
        lines = [line for line in self.control_lines() if line.startswith("INVALID")]
        return "\n".join(lines + [s.summary_line() for s in self.checked if s.status != "pass"])


@dataclass(frozen=True)
class Row:
    """A matrix row with what its manifest entry says about it."""

    record: Mapping[str, Any]
    expectations: tuple[Expectation, ...]
    suites: tuple[str, ...]
    fault_effect: str | None
    reason: str | None
    control: bool = False


def pair_rows(records: list[dict[str, Any]], manifest: Manifest, source: str) -> list[Row]:
    """Pair each matrix row with its manifest entry; raise ValueError on the first problem."""
    entries = {entry.scenario: entry for entry in manifest.scenarios}
    if unjudged := sorted(set(entries) - {record.get("scenario") for record in records}):
        raise ValueError(f"{source}: no matrix row for scenario(s) {', '.join(unjudged)} of the manifest")
    rows = []
    for number, record in enumerate(records):
        missing = [column for column in REQUIRED_COLUMNS if column not in record]
        if missing:
            raise ValueError(f"{source}: row {number} lacks {', '.join(missing)}")
        name = record["scenario"]
        entry = entries.get(name)
        if entry is None or entry.expectations is None:
            raise ValueError(f"manifest: scenario {name!r} has no recorded expectations (plan it again)")
        if entry.guarantee != record["guarantee"]:
            raise ValueError(
                f"{source}: scenario {name!r} claims guarantee {record['guarantee']!r}, "
                f"its manifest entry {entry.guarantee!r}"
            )
        try:
            guarantee = Guarantee(record["guarantee"])
        except ValueError:
            raise ValueError(
                f"{source}: scenario {name!r}: unknown guarantee {record['guarantee']!r}; "
                f"expected one of {', '.join(Guarantee)}"
            ) from None
        expectations = tuple(Expectation(**{**e, "kind": Kind(e["kind"])}) for e in entry.expectations)
        suites = tuple(dict.fromkeys([f"guarantee_{guarantee}", *(e.suite for e in expectations)]))
        rows.append(Row(record, expectations, suites, entry.fault_effect, entry.guarantee_reason, entry.control))
    return rows


def judge(row: Row, failed: list[FailedExpectation]) -> ScenarioVerdict:
    """Apply the status rules of the module docstring to one row and its failed expectations."""
    record = row.record
    kinds = {failure.kind for failure in failed}
    if any(f.column == "fatal" for f in failed):  # the producer gave up where the model says it must not
        return _scenario_verdict(record, "fail", failed, None, row.control)
    reason = None
    if not record["evidence_complete"]:
        reason = record.get("incomplete_reason") or "evidence incomplete"
    elif Kind.EVIDENCE in kinds:
        shortfall = "; ".join(f.describe() for f in failed if f.kind == Kind.EVIDENCE)
        reason = f"the load did not happen as planned ({shortfall})"
        failed = [f for f in failed if f.kind != Kind.EVIDENCE]
    elif kinds & {INTEGRITY, Kind.GUARANTEE}:
        pass  # a broken promise (or a broken row) fails whatever the fault did
    elif not record["fault_effective"]:
        effect = f" ({row.fault_effect})" if row.fault_effect else ""
        reason = record.get("incomplete_reason") or f"fault ineffective{effect}"
    elif Kind.AVAILABILITY in kinds:
        pass
    elif Kind.EFFICACY in kinds:
        reason = "fault ineffective: the anomaly it must cause did not show"
    return _scenario_verdict(record, "incomplete" if reason else "fail" if failed else "pass", failed, reason, row.control)


def _scenario_verdict(
    record: Mapping[str, Any], status: RowStatus, failed: Sequence[FailedExpectation], reason: str | None, control: bool = False
) -> ScenarioVerdict:
    return ScenarioVerdict(
        scenario=record["scenario"],
        guarantee=record["guarantee"],
        status=status,
        failed=tuple(failed),
        counts={name: record.get(name) for name in (*COUNT_COLUMNS, *PIPELINE_COUNT_COLUMNS, *(plants.column for plants in PLANTING.values()))},
        reason=reason,
        fatal_error=record.get("fatal_error"),
        hanging_detail=record.get("hanging_detail"),
        control=control,
        fault=record.get("fault"),
    )


def show(value: Any) -> str:
    """A value for a summary line: null for None, plain text otherwise."""
    return "null" if value is None else str(value)
