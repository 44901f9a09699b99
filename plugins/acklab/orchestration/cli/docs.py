"""`acklab model-table`, `evidence-doc`, `fault-catalog` and `checks-doc`: the generated documentation pages."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from acklab.orchestration.cli.common import (
    console,
)


def model_table(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/guarantees.md: the guarantee model's classes, rules and catalog rows."""
    from acklab.model.tables import DOC, default_tables, to_markdown

    _write_generated(DOC, to_markdown(default_tables()), check, "acklab model-table")


def evidence_doc(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/evidence.md: the run folder's layout, the manifest and every evidence schema."""
    from acklab.report.evidence_doc import DOC, to_markdown

    _write_generated(DOC, to_markdown(), check, "acklab evidence-doc")


def _write_generated(path: Path, text: str, check: bool, command: str) -> None:
    if check:
        current = path.exists() and path.read_text() == text
        console.print(f"{path}: {'current' if current else f'out of date; run `{command}`'}")
        raise typer.Exit(0 if current else 1)
    path.write_text(text)
    console.print(f"wrote {path}")


def fault_catalog(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/faults.md: every fault of the registry, its kind, targets, options and evidence it took effect."""
    from acklab.nemesis.catalog_doc import DOC, fault_catalog_markdown

    _write_generated(DOC, fault_catalog_markdown(), check, "acklab fault-catalog")


def checks_doc(
    check: Annotated[bool, typer.Option(help="exit 1 if the file is not current instead of writing it")] = False,
) -> None:
    """Write docs/checks.md: every check a preset's observation may use, what it checks and its arguments."""
    from acklab.report.checks_doc import DOC, checks_markdown

    _write_generated(DOC, checks_markdown(), check, "acklab checks-doc")
