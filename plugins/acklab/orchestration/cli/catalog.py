"""`acklab presets`, `check-params` and `check-topology`: what the catalog holds and whether a spec is valid."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from acklab.orchestration.cli.common import (
    UserError,
    user_errors,
)


def presets(
    as_json: Annotated[bool, typer.Option("--json", help="print them as JSON")] = False,
    bugs: Annotated[bool, typer.Option("--bugs", help="the known-bugs page: each bug preset, its tracker entry and its state as last read, the versions seen red and green, its last run, its repro folders")] = False,
    presets_file: Annotated[str | None, typer.Option("--presets-file", help="list the presets of this file (yours: a path, or a NAME in $ACKLAB_PRESETS_DIR), checked as `acklab run` checks it")] = None,
) -> None:
    """List the presets: name, source and description (--bugs: the known bugs and what the run store saw of them)."""
    from acklab.plan.preset_files import given_presets_file
    from acklab.plan.presets import presets_of

    def listed() -> dict[str, Any]:
        if bugs and presets_file is not None:
            raise UserError("--bugs lists the catalog's bug presets: give it without --presets-file")
        return presets_of(None if presets_file is None else given_presets_file(presets_file))

    known = user_errors(listed)
    if bugs:
        _known_bugs(as_json)
        return
    summaries = [known[name].summary() for name in sorted(known)]
    if as_json:
        typer.echo(json.dumps(summaries, indent=2))
        return
    from rich.table import Table

    table = Table("name", "source", "description", title="presets")
    for summary in summaries:
        table.add_row(summary["name"], summary["source"], summary["description"])
    Console(width=160).print(table)


def _known_bugs(as_json: bool) -> None:
    from dataclasses import asdict

    from rich.table import Table

    from acklab.report.known_bugs import known_bugs, write_known_bugs

    found = known_bugs()
    page = write_known_bugs()
    if as_json:
        typer.echo(json.dumps([asdict(bug) for bug in found], indent=2))
        return
    table = Table("preset", "tracker entry", "state", "red on", "green on", "last ran", title="known bugs")
    for bug in found:
        table.add_row(
            bug.preset, f"{bug.source}\n{bug.tracker}", f"{bug.state} (read {bug.checked})" if bug.state else "-",
            "\n".join(bug.red) or "-", "\n".join(bug.green) or "-",
            f"{bug.last_ran} ({bug.runs} runs)" if bug.last_ran else "never",
        )
    Console(width=160).print(table)
    typer.echo(f"page: {page}")


def check_params(
    dag_id: Annotated[str, typer.Argument(help="the DAG the params are for, e.g. kafka_delivery_matrix")],
    conf: Annotated[str, typer.Argument(help="the params as JSON, as for `airflow dags test -c`")] = "{}",
) -> None:
    """Check a DAG run's params as the trigger form and the `plan` task would, before any cluster
    starts: one line and exit code 2 if they are wrong."""
    from acklab.orchestration.dag_conf import check_dag_conf

    user_errors(lambda: check_dag_conf(dag_id, conf))
    typer.echo(f"{dag_id}: params ok")


def check_topology(name: str) -> None:
    """Validate a topology spec and print it."""
    from acklab.cluster.topology import load_topology

    typer.echo(user_errors(lambda: load_topology(name)).model_dump_json(indent=2))
