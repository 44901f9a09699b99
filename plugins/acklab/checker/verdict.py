"""Judge a delivery matrix with Great Expectations, against the expectations the model recorded.

The guarantee model (``acklab.model.guarantees``) decides at plan time which expectations each scenario's
row must meet and records them in the run manifest. The ``matrix_integrity`` suite (columns
present, counts non-negative, conservation) validates the whole matrix; each row is validated by
each suite its manifest entry names: the suite of its guarantee class and the suites of the
availability and efficacy rules that match it. Each suite validates once, the rows that name it
together (failures name their rows by ``scenario``). The suites are built from the model's tables, so
before anything runs, each row's recorded expectations are checked to be exactly what its suites
apply. Suites, validation definitions and checkpoints live in a File Data Context whose JSON is
committed; validation results and Data Docs go to its ``uncommitted/`` directory, next to a page
with the model's tables (``guarantees.html``).

Status of a row: fail if the producer raised a fatal error the model rules out (a fatal error is a
verdict even when it leaves messages of unknown outcome); incomplete if its evidence is (the manifest says so, or an evidence expectation
failed: the load did not send what it planned); fail if an integrity or guarantee expectation
failed; incomplete if its fault took no effect (the manifest says so); fail if an availability
expectation failed; incomplete ("fault ineffective") if an efficacy expectation failed; else pass.
Every scenario of the manifest must have a matrix row.

The run's negative control (the manifest entry marked `control`: a planted loss) is judged like any
row and must fail with `lost` equal to `planted_lost` (`ControlCheck`); it does not count in the
run's status, which is `invalid` if a control was not caught so, else the worst status of the other
rows (`overall`).

Great Expectations is imported inside functions: importing it takes seconds, importing this
module should not.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

from acklab.base.paths import expectations_dir
from acklab.model.claims import Claim, Expectation, Kind, claim, suite_class
from acklab.model.classes import Guarantee
from acklab.model.guarantees import suite_expectations
from acklab.model.tables import default_tables, to_html
from acklab.nemesis.faults import NO_FAULT
from acklab.store.contract import COUNT_COLUMNS, IDENTITIES, METRIC_COLUMNS
from acklab.store.runs import Manifest, RunDir
from acklab.store.schemas import MATRIX

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.checkpoint import CheckpointResult
    from great_expectations.core import ExpectationSuite
    from great_expectations.data_context import FileDataContext

Status = Literal["pass", "fail", "incomplete", "invalid"]
STATUS_ORDER: tuple[Status, ...] = ("invalid", "fail", "incomplete", "pass")  # worst first


def overall(statuses: Sequence[str] | set[str]) -> Status:
    """The status of a whole made of parts with `statuses`: the worst of them (pass if none)."""
    return next((status for status in STATUS_ORDER if status in statuses), "pass")

DATASOURCE = "acklab"
ASSET = "delivery_matrix_row"
BATCH_DEFINITION = "whole_row"
SITE = "local_site"
SITE_DIR = Path("uncommitted/data_docs/local_site")  # as in great_expectations.yml
logging.getLogger("great_expectations").setLevel(logging.WARNING)  # its import alone logs ~200 INFO lines, none of use


def data_docs_site() -> Path:
    """The folder of the local Data Docs site (of the GX project at `expectations_dir()`)."""
    return expectations_dir() / "gx" / SITE_DIR
MODEL_PAGE = "guarantees.html"
INTEGRITY_SUITE = "matrix_integrity"
INTEGRITY = "integrity"  # the kind of the integrity suite's expectations
PLANNED_REASON = "planned guarantee_reason"  # derived: the row's classification reason, from its manifest entry

# Descriptive columns every row must fill (the others may be null where they do not apply).
IDENTITY_COLUMNS = ("scenario", "profile", "fault", "guarantee", "fault_effective", "evidence_complete")
MATRIX_COLUMNS = tuple(MATRIX.names)
MISSING = "missing columns"  # derived: the matrix columns a row lacks
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
        return f"{self.suite}: {self.expects}, observed {_show(self.observed)}"


@dataclass(frozen=True)
class ScenarioVerdict:
    """The verdict on one matrix row."""

    scenario: str
    guarantee: str
    status: Status
    failed: tuple[FailedExpectation, ...]
    counts: Mapping[str, Any]
    reason: str | None = None
    fatal_error: str | None = None  # the producer's fatal error, named whenever there was one
    hanging_detail: str | None = None  # the hanging transactions, named whenever there were some
    control: bool = False  # the run's negative control (`ControlCheck`)

    def summary_line(self) -> str:
        """One line: status, scenario, class, why it is not a pass, and the key counts."""
        parts = [f"{self.status.upper()} {self.scenario} [{self.guarantee}]"]
        why = [self.reason] if self.reason else []
        why += [failure.describe() for failure in self.failed]
        if self.fatal_error:
            why.append(f"fatal producer error ({self.fatal_error})")
        if self.hanging_detail:
            why.append(f"hanging transaction ({self.hanging_detail})")
        if why:
            parts.append("; ".join(why))
        counts = ", ".join(f"{name}={_show(self.counts.get(name))}" for name in SUMMARY_COUNTS)
        parts.append(f"({counts})")
        return " ".join(parts)


@dataclass(frozen=True)
class ControlCheck:
    """Whether the checker caught the run's planted loss: the control row is red (`status` fail)
    with `lost` equal to the records the proxy swallowed (`planted`, at least one)."""

    scenario: str
    status: Status
    planted: int | None
    lost: int | None
    reason: str | None = None

    @property
    def caught(self) -> bool:
        return self.status == "fail" and bool(self.planted) and self.lost == self.planted

    def line(self) -> str:
        numbers = f"the proxy swallowed {_show(self.planted)} records, the checker counted {_show(self.lost)} lost"
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
        return tuple(
            ControlCheck(s.scenario, s.status, s.counts.get("planted_lost"), s.counts.get("lost"), s.reason)
            for s in self.scenarios if s.control
        )

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
class _Row:
    """A matrix row with what its manifest entry says about it."""

    record: Mapping[str, Any]
    expectations: tuple[Expectation, ...]
    suites: tuple[str, ...]
    fault_effect: str | None
    reason: str | None
    control: bool = False


def conservation_column(parts: Sequence[str]) -> str:
    """The derived column holding the sum of ``parts``, named after the sum."""
    return " + ".join(parts)


def build_suites() -> list[ExpectationSuite]:
    """The integrity suite and every suite of the model, defined in code.

    Every expectation explains itself in ``meta`` (kept in the suite JSON and in every validation
    result: ``kind``, ``expects``, ``rule``) and in ``notes``, which Data Docs render.
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from great_expectations.expectations.row_conditions import Column

    def explained(kind: type, rule: str, expects: str, category: str, **kwargs: Any) -> Any:
        meta = {"kind": category, "expects": expects, "rule": rule}
        return kind(meta=meta, notes=[f"**{category}**: {rule}"], **kwargs)

    def bound(expectation: Expectation) -> Any:
        condition = {"row_condition": Column("fault") == NO_FAULT} if expectation.no_fault_only else {}
        return explained(
            gxe.ExpectColumnValuesToBeBetween,
            expectation.rule,
            expectation.text(),
            str(expectation.kind),
            column=expectation.column,
            min_value=expectation.min,
            max_value=expectation.max,
            **condition,
        )

    model_link = f"[The guarantee model: classes, rules and every catalog row](../{MODEL_PAGE})"
    integrity = [
        explained(gxe.ExpectColumnValuesToNotBeNull, f"Every row names its {c}.", f"{c} is not null", INTEGRITY, column=c)
        for c in IDENTITY_COLUMNS
    ]
    integrity.append(
        explained(
            gxe.ExpectColumnValuesToBeInSet,
            "Every row has every column of the matrix contract (null where a value does not apply).",
            "no matrix column is missing",
            INTEGRITY,
            column=MISSING,
            value_set=[""],
        )
    )
    for column in COUNT_COLUMNS:
        integrity += [
            explained(gxe.ExpectColumnValuesToNotBeNull, f"The checker reports {column}.", f"{column} is not null", INTEGRITY, column=column),
            explained(gxe.ExpectColumnValuesToBeBetween, f"{column} is a count, so never negative.", f"{column} >= 0", INTEGRITY, column=column, min_value=0),
        ]
    integrity += [
        explained(
            gxe.ExpectColumnValuesToBeBetween,
            f"{column} is never negative (null when nothing was acknowledged).",
            f"{column} >= 0",
            INTEGRITY,
            column=column,
            min_value=0,
        )
        for column in METRIC_COLUMNS
    ]
    integrity += [
        explained(
            gxe.ExpectColumnPairValuesToBeEqual,
            f"Conservation: every message counted in {total} is in exactly one of {', '.join(parts)}.",
            f"{total} == {conservation_column(parts)}",
            INTEGRITY,
            column_A=total,
            column_B=conservation_column(parts),
        )
        for total, parts in IDENTITIES
    ]
    suites = [
        gx.ExpectationSuite(
            name=INTEGRITY_SUITE,
            expectations=integrity,
            meta={"purpose": "Structural checks on every matrix row, whatever its guarantee."},
            notes=["Structural checks on every matrix row, whatever its guarantee.", model_link],
        )
    ]
    for name, expectations in suite_expectations().items():
        first = expectations[0]
        gx_expectations = [bound(e) for e in expectations]
        if (guarantee := suite_class(name)) is not None:
            gx_expectations[:0] = [
                explained(
                    gxe.ExpectColumnValuesToBeInSet,
                    "This suite judges only rows that claim this guarantee.",
                    f"guarantee in [{guarantee}]",
                    INTEGRITY,
                    column="guarantee",
                    value_set=[guarantee],
                ),
                explained(
                    gxe.ExpectColumnPairValuesToBeEqual,
                    "The row carries the reason the model gave for its class at plan time (its manifest entry's).",
                    "guarantee_reason as planned",
                    INTEGRITY,
                    column_A="guarantee_reason",
                    column_B=PLANNED_REASON,
                ),
            ]
        summary = _suite_summary(name, first)
        suites.append(
            gx.ExpectationSuite(
                name=name, expectations=gx_expectations, meta={"kind": str(first.kind)}, notes=[summary, model_link]
            )
        )
    return suites


def _suite_summary(name: str, first: Expectation) -> str:
    """What a model suite checks, for its Data Docs page."""
    if (guarantee := suite_class(name)) is not None:
        return f"**{guarantee}**: {claim(name).text} Expectations marked 'if fault == none' apply only without a fault."
    rule = claim(name)
    return f"**{rule.kind}** rule, applied when: {rule.scope.when}{_clients(rule)}. {rule.why}"


def _clients(rule: Claim) -> str:
    """`, for the librdkafka client` where a claim is documented for some client families only."""
    if rule.scope.families is None:
        return ""
    return f", for the {', '.join(sorted(rule.scope.families))} client{'s' if len(rule.scope.families) > 1 else ''}" + (
        f" {rule.scope.versions}" if rule.scope.versions else ""
    )


def ensure_project(root: Path | None = None) -> FileDataContext:
    """Create or update the GX project under ``root/gx`` (default: ``expectations_dir()``).

    Idempotent: existing datasource, asset and batch definition are reused (their ids stay
    stable), suites, validation definitions and checkpoints are added or updated by name (and
    deleted when the model no longer has them), and expectations keep their ids while unchanged.
    Also writes the model page into the site.
    """
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=Path(root or expectations_dir()))
    # Metric progress bars would flood task logs with one bar per expectation run.
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.variables.save()
    try:
        datasource = context.data_sources.get(DATASOURCE)
    except KeyError:
        datasource = context.data_sources.add_pandas(DATASOURCE)
    try:
        asset = datasource.get_asset(ASSET)
    except LookupError:
        asset = datasource.add_dataframe_asset(ASSET)
    try:
        batch_definition = asset.get_batch_definition(BATCH_DEFINITION)
    except KeyError:
        batch_definition = asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)

    stored = {suite.name: suite for suite in context.suites.all()}
    suites = build_suites()
    for name in stored.keys() - {suite.name for suite in suites}:  # no longer in the model
        context.checkpoints.delete(name)
        context.validation_definitions.delete(name)
        context.suites.delete(name)
    for suite in suites:
        if suite.name in stored:
            _keep_expectation_ids(suite, stored[suite.name])
        suite = context.suites.add_or_update(suite)
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=suite)
        )
        # Every suite judges several rows at once: its failures must name their rows.
        by_row = {"result_format": "COMPLETE", "unexpected_index_column_names": ["scenario"]}
        context.checkpoints.add_or_update(
            gx.Checkpoint(name=suite.name, validation_definitions=[definition], result_format=by_row)
        )
    site = Path(context.root_directory) / SITE_DIR
    site.mkdir(parents=True, exist_ok=True)
    (site / MODEL_PAGE).write_text(to_html(default_tables()))
    return context


_CONTEXTS: dict[Path, FileDataContext] = {}


def _context(root: Path) -> FileDataContext:
    """The context of ``root``, ensured once per process (the model does not change while it runs)."""
    key = Path(root).resolve()
    if key not in _CONTEXTS:
        _CONTEXTS[key] = ensure_project(root)
    return _CONTEXTS[key]


def _keep_expectation_ids(suite: ExpectationSuite, stored: ExpectationSuite) -> None:
    """Give each unchanged expectation of ``suite`` the id it has in ``stored``.

    ``suites.add_or_update`` means to do this, but in GX 1.24 expectation equality includes the
    id, so a suite built in code would get fresh ids (and a JSON diff) on every call.
    """
    for expectation in suite.expectations:
        for old in stored.expectations:
            if old == expectation.copy(update={"id": old.id}):
                expectation.id = old.id
                break


def validate_matrix(run: RunDir, root: Path, run_name: str) -> Verdict:
    """Validate every row of the run's matrix against its manifest and return the verdict.

    Each checkpoint runs once under the run name ``<run_name>``: the integrity suite's on the whole
    matrix, each model suite's on the rows that name it; a failure names its rows by ``scenario``
    (Data Docs show them in each suite's result). Data Docs are built once, at the end.

    Raises:
        ValueError: the matrix is empty, a row lacks a required column, or its manifest entry is
            missing, names another guarantee, or records expectations its suites do not apply
            (the model changed since the run was planned). Nothing is validated then.
    """
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier

    records = run.read_matrix()
    if not records:
        raise ValueError(f"{run.matrix_json}: the matrix has no rows, so there is nothing to judge")
    if not run.manifest.is_file():
        raise ValueError(f"{run.matrix_json}: no manifest at {run.manifest}, so the expected guarantees are unknown")
    rows = _rows(records, run.read_manifest(), str(run.matrix_json))
    context = _context(root)
    for row in rows:
        _check_suites(context, row, str(run.manifest))

    run_id = RunIdentifier(run_name=run_name, run_time=dt.datetime.now(dt.UTC))
    scenarios = [row.record["scenario"] for row in rows]
    frame = _frame(records, [row.reason for row in rows])
    members = {INTEGRITY_SUITE: scenarios}  # suite -> the scenarios whose rows it judges
    for row, scenario in zip(rows, scenarios, strict=True):
        for name in row.suites:
            members.setdefault(name, []).append(scenario)
    failed: dict[str, list[FailedExpectation]] = {scenario: [] for scenario in scenarios}
    validated = []
    for name, judged in members.items():
        batch = frame if name == INTEGRITY_SUITE else frame[frame["scenario"].isin(judged)]
        result = context.checkpoints.get(name).run(batch_parameters={"dataframe": batch}, run_id=run_id)
        validated += result.run_results
        for scenario, found in _failures(name, result, judged).items():
            failed[scenario] += found
    pages = [*validated, *(ExpectationSuiteIdentifier(name) for name in sorted(members))]
    context.build_data_docs(site_names=[SITE], resource_identifiers=pages)
    verdicts = tuple(_judge(row, failed[scenario]) for row, scenario in zip(rows, scenarios, strict=True))
    return Verdict(run_name, verdicts, _index_path(context))


def _rows(records: list[dict[str, Any]], manifest: Manifest, source: str) -> list[_Row]:
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
        rows.append(_Row(record, expectations, suites, entry.fault_effect, entry.guarantee_reason, entry.control))
    return rows


def _check_suites(context: FileDataContext, row: _Row, manifest: str) -> None:
    """The row's recorded expectations must be exactly what its suites apply to it."""
    no_fault = row.record["fault"] == NO_FAULT
    for name in row.suites:
        applied = {
            (e.column, e.min_value, e.max_value, e.row_condition is not None)
            for e in context.suites.get(name).expectations
            if e.meta.get("kind") != INTEGRITY and (e.row_condition is None or no_fault)
        }
        recorded = {(e.column, e.min, e.max, e.no_fault_only) for e in row.expectations if e.suite == name}
        if applied != recorded:
            raise ValueError(
                f"{manifest}: scenario {row.record['scenario']!r} recorded {sorted(map(str, recorded))} for "
                f"suite {name}, which applies {sorted(map(str, applied))}: the model changed since the run was planned"
            )


def _frame(records: list[dict[str, Any]], reasons: Sequence[str | None]) -> pd.DataFrame:
    """The rows as a frame, plus the derived columns: the matrix columns each row lacks, the
    classification reason each row's manifest entry planned (``reasons``), and one column per
    conservation sum (null where a part is null or missing)."""
    import pandas as pd

    frame = pd.DataFrame(records)
    frame[PLANNED_REASON] = list(reasons)
    frame[MISSING] = [", ".join(c for c in MATRIX_COLUMNS if c not in record) for record in records]
    for _, parts in IDENTITIES:
        frame[conservation_column(parts)] = frame.reindex(columns=list(parts)).sum(axis=1, min_count=len(parts))
    return frame


def _judge(row: _Row, failed: list[FailedExpectation]) -> ScenarioVerdict:
    """Apply the status rules of the module docstring to one row and its failed expectations."""
    record = row.record
    kinds = {failure.kind for failure in failed}
    if any(f.column == "fatal" for f in failed):  # the producer gave up where the model says it must not
        return _verdict(record, "fail", failed, None, row.control)
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
    return _verdict(record, "incomplete" if reason else "fail" if failed else "pass", failed, reason, row.control)


def _verdict(
    record: Mapping[str, Any], status: Status, failed: Sequence[FailedExpectation], reason: str | None, control: bool = False
) -> ScenarioVerdict:
    return ScenarioVerdict(
        scenario=record["scenario"],
        guarantee=record["guarantee"],
        status=status,
        failed=tuple(failed),
        counts={name: record.get(name) for name in (*COUNT_COLUMNS, "planted_lost")},
        reason=reason,
        fatal_error=record.get("fatal_error"),
        hanging_detail=record.get("hanging_detail"),
        control=control,
    )


def _failures(suite: str, result: CheckpointResult, scenarios: list[str]) -> dict[str, list[FailedExpectation]]:
    """The failed expectations of a checkpoint run, per scenario.

    A failure that names its unexpected rows (by ``scenario``) belongs to those rows, with their
    values as observed; any other failure (an exception, a missing column) to every scenario of
    ``scenarios`` (those the checkpoint judged).
    """
    found: dict[str, list[FailedExpectation]] = {scenario: [] for scenario in scenarios}
    for suite_result in result.run_results.values():
        for expectation_result in suite_result.results:
            if expectation_result.success:
                continue
            config = expectation_result.expectation_config
            meta = (config.meta if config else None) or {}
            detail = expectation_result.result or {}
            observed: dict[str, Any]
            if errors := _errors(expectation_result.exception_info):
                message = f"exception: {'; '.join(sorted(set(errors)))}"
                observed = dict.fromkeys(scenarios, message)
            elif entries := detail.get("unexpected_index_list"):
                observed = {entry["scenario"]: _values([v for k, v in entry.items() if k != "scenario"]) for entry in entries}
            elif "observed_value" in detail:
                observed = dict.fromkeys(scenarios, detail["observed_value"])
            else:
                observed = dict.fromkeys(scenarios, _values(detail.get("partial_unexpected_list") or []))
            for scenario, value in observed.items():
                found[scenario].append(
                    FailedExpectation(
                        suite=suite,
                        kind=meta.get("kind", INTEGRITY),
                        expects=meta.get("expects") or (config.type if config else "unknown"),
                        column=config.kwargs.get("column") if config else None,
                        observed=value,
                    )
                )
    return found


def _values(values: Sequence[Any]) -> Any:
    """One unexpected value as itself; several (a column pair's) as ``a vs b``."""
    plain = [_plain(value) for value in values]
    if len(plain) <= 1:
        return plain[0] if plain else None
    return " vs ".join(_show(value) for value in plain)


def _errors(exception_info: Mapping[str, Any] | None) -> list[str]:
    """Exception messages of a result; GX nests them per metric when a metric failed."""
    info = exception_info or {}
    if "raised_exception" in info:
        return [str(info.get("exception_message"))] if info["raised_exception"] else []
    nested = [value for value in info.values() if isinstance(value, dict)]
    return [message for metric_info in nested for message in _errors(metric_info)]


def _index_path(context: FileDataContext) -> Path | None:
    """The local Data Docs index.html, or None if it has not been built."""
    urls = context.get_docs_sites_urls(site_name=SITE, only_if_exists=True)
    url = urls[0].get("site_url") if urls else None
    return Path(unquote(urlparse(url).path)) if url else None


def _plain(value: Any) -> Any:
    """An unexpected value from GX as a plain Python value; NaN becomes None, 3.0 becomes 3."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _show(value: Any) -> str:
    """A value for a summary line: null for None, plain text otherwise."""
    return "null" if value is None else str(value)
