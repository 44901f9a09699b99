"""Validate a run's delivery matrix with the Great Expectations suites and read the verdict from
the results.

Each row is validated by the ``matrix_integrity`` suite and by each suite its manifest entry names
(`acklab.checker.verdict.pair_rows`); each suite validates once, the rows that name it together
(failures name their rows by ``scenario``). The suites are built from the model's tables, so before
anything runs, each row's recorded expectations are checked to be exactly what its suites apply.
The failed expectations of each row are then judged by the pure rules of `acklab.checker.verdict`.

Great Expectations is imported inside functions: importing it takes seconds, importing this
module should not.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from acklab.checker.gx_project import SITE, project_context, project_lock
from acklab.checker.gx_suites import INTEGRITY_SUITE, MATRIX_COLUMNS, MISSING, PLANNED_REASON, conservation_column
from acklab.checker.verdict import INTEGRITY, FailedExpectation, Row, Verdict, judge, pair_rows, show
from acklab.nemesis.faults import NO_FAULT
from acklab.store.contract import IDENTITIES, PIPELINE_IDENTITIES
from acklab.store.runs import RunDir
from acklab.store.schemas import MATRIX_PIPELINE

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.checkpoint import CheckpointResult
    from great_expectations.data_context import FileDataContext


def validate_matrix(run: RunDir, root: Path, run_name: str) -> Verdict:
    """`_validate`, holding the GX project's lock (`acklab.checker.gx_project.project_lock`): one
    validation at a time per project among the processes of a host."""
    with project_lock(root):
        return _validate(run, root, run_name)


def _validate(run: RunDir, root: Path, run_name: str) -> Verdict:
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
    rows = pair_rows(records, run.read_manifest(), str(run.matrix_json))
    context = project_context(root)
    for row in rows:
        _check_suites(context, row, str(run.manifest))

    run_id = RunIdentifier(run_name=gx_run_name(run_name), run_time=dt.datetime.now(dt.UTC))
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
    verdicts = tuple(judge(row, failed[scenario]) for row, scenario in zip(rows, scenarios, strict=True))
    return Verdict(run_name, verdicts, _index_path(context))


def gx_run_name(run_name: str) -> str:
    """The name a run's validations carry in the GX project: ``acklab-<run name>``.

    GX's Data Docs parse a run name as a date (dateutil) to decide whether to show it beside the run
    time. A run id's random suffix can read as a UTC offset beyond ±24 h (``20261207T000311-5093ad``:
    about 1 run id in 1,500), and the comparison then raised and the docs were rendered without that
    run's pages, logging a traceback. A leading word no date parser knows keeps it a plain name.
    """
    return f"acklab-{run_name}"


def _check_suites(context: FileDataContext, row: Row, manifest: str) -> None:
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

    # A row written before pipelines existed is a producer scenario's: its pipeline columns are null.
    records = [dict.fromkeys(MATRIX_PIPELINE.names) | record for record in records]
    frame = pd.DataFrame(records)
    frame[PLANNED_REASON] = list(reasons)
    frame[MISSING] = [", ".join(c for c in MATRIX_COLUMNS if c not in record) for record in records]
    for _, parts in (*IDENTITIES, *PIPELINE_IDENTITIES):
        frame[conservation_column(parts)] = frame.reindex(columns=list(parts)).sum(axis=1, min_count=len(parts))
    return frame


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
    return " vs ".join(show(value) for value in plain)


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

