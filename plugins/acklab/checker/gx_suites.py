"""The Great Expectations suites of the guarantee model, built in code.

The ``matrix_integrity`` suite (columns present, counts non-negative, conservation) validates the
whole matrix; each model suite (`acklab.model.guarantees.suite_expectations`: the suite of a
guarantee class, or of an availability, efficacy or evidence rule) validates the rows whose
manifest entries name it. Each expectation reads a matrix column or one of the derived columns
named here (`MISSING`, `PLANNED_REASON`, `conservation_column`), which `acklab.checker.gx_validation`
adds to the rows before validating them. The committed JSON of these suites
(``expectations/gx/expectations``) is what `acklab.checker.gx_project.ensure_project` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acklab.checker.verdict import INTEGRITY
from acklab.model.claims import Claim, Expectation, claim, suite_class
from acklab.model.guarantees import suite_expectations
from acklab.nemesis.faults import NO_FAULT
from acklab.store.contract import COUNT_COLUMNS, IDENTITIES, METRIC_COLUMNS, PIPELINE_COUNT_COLUMNS, PIPELINE_IDENTITIES
from acklab.store.schemas import MATRIX

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite

MODEL_PAGE = "guarantees.html"  # the model's tables, in the Data Docs site next to the suites
INTEGRITY_SUITE = "matrix_integrity"
PLANNED_REASON = "planned guarantee_reason"  # derived: the row's classification reason, from its manifest entry

# Descriptive columns every row must fill (the others may be null where they do not apply).
IDENTITY_COLUMNS = ("scenario", "profile", "fault", "guarantee", "fault_effective", "evidence_complete")
MATRIX_COLUMNS = tuple(MATRIX.names)
MISSING = "missing columns"  # derived: the matrix columns a row lacks


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
            gxe.ExpectColumnValuesToBeBetween,
            f"{column} is a count, so never negative (null in a producer scenario's row).",
            f"{column} >= 0",
            INTEGRITY,
            column=column,
            min_value=0,
        )
        for column in PIPELINE_COUNT_COLUMNS
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
        for total, parts in (*IDENTITIES, *PIPELINE_IDENTITIES)
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

