"""Judge a delivery matrix against its guarantee classes with Great Expectations.

Every matrix row (one scenario) is validated twice, each time as a one-row dataframe: by the
``matrix_integrity`` suite (counts present and non-negative) and by the suite of the row's
guarantee class. Suites, validation definitions and checkpoints live in a File Data Context
whose JSON is committed; validation results and Data Docs go to its ``uncommitted/`` directory.

Great Expectations is imported inside functions: importing it takes seconds, importing this
module should not.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote, urlparse

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite
    from great_expectations.core.expectation_validation_result import (
        ExpectationValidationResult,
    )
    from great_expectations.data_context import FileDataContext

Status = Literal["pass", "fail", "incomplete"]

DEFAULT_ROOT = Path("/work/main/expectations")
DATASOURCE = "acklab"
ASSET = "delivery_matrix_row"
BATCH_DEFINITION = "whole_row"
SITE = "local_site"
INTEGRITY_SUITE = "matrix_integrity"

IDENTITY_COLUMNS = ("scenario", "profile", "fault", "guarantee")
COUNT_COLUMNS = (
    "sent",
    "acked",
    "failed",
    "unknown",
    "records_read",
    "delivered",
    "lost",
    "duplicated",
    "duplicates",
    "failed_clean",
    "indeterminate",
    "unknown_absent",
    "unexpected",
    "reordered",
)
SUMMARY_COUNTS = ("sent", "acked", "lost", "duplicates", "reordered")
REQUIRED_COLUMNS = ("scenario", "guarantee", "evidence_complete", "fault_effective")


@dataclass(frozen=True)
class Guarantee:
    """A guarantee class: what it promises, and the counts it requires to be zero (with why)."""

    promise: str
    zero: Mapping[str, str]


GUARANTEES: Mapping[str, Guarantee] = {
    "at-most-once": Guarantee(
        "acks=0: the producer does not wait for the broker, so records may be lost.", {}
    ),
    "leader-durable": Guarantee(
        "acks=1: a record is acknowledged once the partition leader has it; it may be lost "
        "when that leader fails before a follower copied it.",
        {},
    ),
    "at-least-once": Guarantee(
        "acks=all with retries: no acknowledged record is lost; retries may duplicate or "
        "reorder records.",
        {"lost": "An acknowledged record must be readable from the topic."},
    ),
    "exactly-once": Guarantee(
        "Idempotent producer: every acknowledged record is written once, in send order per key.",
        {
            "lost": "An acknowledged record must be readable from the topic.",
            "duplicates": "The idempotent producer must not write a record twice.",
            "reordered": "The idempotent producer must keep the send order of each key.",
        },
    ),
}


class GuaranteeViolation(Exception):
    """A matrix did not pass: some scenario failed its guarantee or lacks evidence."""


@dataclass(frozen=True)
class FailedExpectation:
    """One expectation a scenario's row did not meet."""

    suite: str
    expectation_type: str
    column: str | None
    observed: Any

    def describe(self) -> str:
        """``expectation_type(column) observed value``."""
        return f"{self.expectation_type}({self.column or ''}) observed {_show(self.observed)}"


@dataclass(frozen=True)
class ScenarioVerdict:
    """The verdict on one matrix row."""

    scenario: str
    guarantee: str
    status: Status
    failed: tuple[FailedExpectation, ...]
    counts: Mapping[str, Any]
    reason: str | None = None

    def summary_line(self) -> str:
        """One line: status, scenario, class, why it is not a pass, and the key counts."""
        parts = [f"{self.status.upper()} {self.scenario} [{self.guarantee}]"]
        why = [self.reason] if self.reason else []
        why += [failure.describe() for failure in self.failed]
        if why:
            parts.append("; ".join(why))
        counts = ", ".join(f"{name}={_show(self.counts.get(name))}" for name in SUMMARY_COUNTS)
        parts.append(f"({counts})")
        return " ".join(parts)


@dataclass(frozen=True)
class Verdict:
    """The verdict on a whole matrix, with the Data Docs page that shows the evidence."""

    run_name: str
    scenarios: tuple[ScenarioVerdict, ...]
    data_docs_index: Path | None

    @property
    def status(self) -> Status:
        """fail if any scenario failed, else incomplete if any is incomplete, else pass."""
        statuses = {scenario.status for scenario in self.scenarios}
        if "fail" in statuses:
            return "fail"
        if "incomplete" in statuses:
            return "incomplete"
        return "pass"

    def summary_lines(self) -> list[str]:
        """One line per scenario, in matrix order."""
        return [scenario.summary_line() for scenario in self.scenarios]

    def raise_for_status(self) -> None:
        """Raise GuaranteeViolation naming every scenario that did not pass."""
        if self.status != "pass":
            raise GuaranteeViolation(
                "\n".join(s.summary_line() for s in self.scenarios if s.status != "pass")
            )


def suite_name(guarantee: str) -> str:
    """The suite (and validation definition and checkpoint) name of a guarantee class."""
    if guarantee not in GUARANTEES:
        raise ValueError(
            f"unknown guarantee {guarantee!r}; expected one of {', '.join(GUARANTEES)}"
        )
    return f"guarantee_{guarantee}"


def build_suites() -> list[ExpectationSuite]:
    """The integrity suite and one suite per guarantee class, defined in code.

    Every expectation explains itself twice: in ``meta`` (kept in the suite JSON and in every
    validation result) and in ``notes``, which Data Docs render on the suite page.
    """
    import great_expectations as gx
    import great_expectations.expectations as gxe

    def explained(kind: type, rule: str, guarantee: str | None = None, **kwargs: Any) -> Any:
        """An expectation of type ``kind`` whose meta and notes state ``rule``."""
        meta = {"rule": rule}
        notes = [rule]
        if guarantee is not None:
            meta.update(guarantee=guarantee, promise=GUARANTEES[guarantee].promise)
            notes.append(f"**{guarantee}**: {GUARANTEES[guarantee].promise}")
        return kind(meta=meta, notes=notes, **kwargs)

    integrity = [
        explained(gxe.ExpectColumnValuesToNotBeNull, f"Every row names its {name}.", column=name)
        for name in IDENTITY_COLUMNS
    ]
    for column in COUNT_COLUMNS:
        integrity += [
            explained(
                gxe.ExpectColumnValuesToNotBeNull, f"The checker reports {column}.", column=column
            ),
            explained(
                gxe.ExpectColumnValuesToBeBetween,
                f"{column} is a count, so never negative.",
                column=column,
                min_value=0,
            ),
        ]
    suites = [
        gx.ExpectationSuite(
            name=INTEGRITY_SUITE,
            expectations=integrity,
            meta={"purpose": "Structural checks on every matrix row, whatever its guarantee."},
        )
    ]
    for guarantee, spec in GUARANTEES.items():
        expectations = [
            explained(
                gxe.ExpectColumnValuesToBeInSet,
                "This suite judges only rows that claim this guarantee.",
                guarantee,
                column="guarantee",
                value_set=[guarantee],
            )
        ]
        expectations += [
            explained(
                gxe.ExpectColumnValuesToBeBetween,
                rule,
                guarantee,
                column=column,
                min_value=0,
                max_value=0,
            )
            for column, rule in spec.zero.items()
        ]
        suites.append(
            gx.ExpectationSuite(
                name=suite_name(guarantee),
                expectations=expectations,
                meta={"guarantee": guarantee, "promise": spec.promise},
            )
        )
    return suites


def ensure_project(root: Path = DEFAULT_ROOT) -> FileDataContext:
    """Create or update the GX project under ``root/gx`` and return its context.

    Idempotent: existing datasource, asset and batch definition are reused (their ids stay
    stable), suites, validation definitions and checkpoints are added or updated by name.
    """
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=Path(root))
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
    for suite in build_suites():
        if suite.name in stored:
            _keep_expectation_ids(suite, stored[suite.name])
        suite = context.suites.add_or_update(suite)
        definition = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch_definition, suite=suite)
        )
        context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=suite.name,
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="update_data_docs", site_names=[SITE])],
            )
        )
    return context


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


def validate_matrix(matrix_json: Path, root: Path, run_name: str) -> Verdict:
    """Validate every row of ``matrix_json`` and return the verdict.

    Each row runs the integrity checkpoint and its class checkpoint under the run name
    ``<run_name>__<scenario>``, so Data Docs list the results per scenario; each checkpoint's
    UpdateDataDocsAction builds that scenario's pages and the site index. Rows whose fault
    was ineffective or whose evidence is incomplete are validated too but never pass.

    Raises:
        ValueError: the matrix is empty, a row lacks a required column or names an unknown
            guarantee. Nothing is validated then.
    """
    import pandas as pd
    from great_expectations.core.run_identifier import RunIdentifier

    records: list[dict[str, Any]] = json.loads(Path(matrix_json).read_text())
    if not records:
        raise ValueError(f"{matrix_json}: the matrix has no rows, so there is nothing to judge")
    for number, record in enumerate(records):
        missing = [column for column in REQUIRED_COLUMNS if column not in record]
        if missing:
            raise ValueError(f"{matrix_json}: row {number} lacks {', '.join(missing)}")
        try:
            suite_name(record["guarantee"])
        except ValueError as error:
            raise ValueError(f"{matrix_json}: scenario {record['scenario']!r}: {error}") from None

    context = ensure_project(root)
    run_time = dt.datetime.now(dt.timezone.utc)
    verdicts = []
    for record in records:
        # One frame per row, so one row's nulls cannot turn another row's counts into floats.
        row = pd.DataFrame([record])
        run_id = RunIdentifier(run_name=f"{run_name}__{record['scenario']}", run_time=run_time)
        failed: list[FailedExpectation] = []
        for name in (INTEGRITY_SUITE, suite_name(record["guarantee"])):
            result = context.checkpoints.get(name).run(
                batch_parameters={"dataframe": row}, run_id=run_id
            )
            failed += [
                _failure(name, expectation_result)
                for suite_result in result.run_results.values()
                for expectation_result in suite_result.results
                if not expectation_result.success
            ]
        verdicts.append(_judge(record, failed))

    return Verdict(run_name, tuple(verdicts), _index_path(context))


def _judge(record: Mapping[str, Any], failed: list[FailedExpectation]) -> ScenarioVerdict:
    """Apply the status rules to one row and its failed expectations."""
    reason = None
    if not record["evidence_complete"]:
        reason = record.get("incomplete_reason") or "evidence incomplete"
    elif not record["fault_effective"]:
        reason = record.get("incomplete_reason") or "fault ineffective"
    status: Status = "incomplete" if reason else "fail" if failed else "pass"
    return ScenarioVerdict(
        scenario=record["scenario"],
        guarantee=record["guarantee"],
        status=status,
        failed=tuple(failed),
        counts={name: record.get(name) for name in COUNT_COLUMNS},
        reason=reason,
    )


def _failure(suite: str, result: ExpectationValidationResult) -> FailedExpectation:
    """Describe a failed expectation: its observed value, unexpected values or exception."""
    config = result.expectation_config
    detail = result.result or {}
    if errors := _errors(result.exception_info):
        observed: Any = f"exception: {'; '.join(sorted(set(errors)))}"
    elif "observed_value" in detail:
        observed = detail["observed_value"]
    else:
        values = [_plain(value) for value in detail.get("partial_unexpected_list") or []]
        observed = values[0] if len(values) == 1 else values
    return FailedExpectation(
        suite=suite,
        expectation_type=config.type if config else "unknown",
        column=config.kwargs.get("column") if config else None,
        observed=observed,
    )


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
    """An unexpected value from GX as a plain Python value; NaN becomes None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _show(value: Any) -> str:
    """A value for a summary line: null for None, plain text otherwise."""
    return "null" if value is None else str(value)
