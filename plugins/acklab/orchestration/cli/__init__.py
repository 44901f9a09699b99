"""`acklab` command line: the same scenarios as the DAG, without Airflow.

A user's mistake (bad spec, missing jars, unwritable run store, ...) is one line on stderr and exit
code 2, before any broker starts; a run ends 0 only when every scenario passed, and with one code per
other outcome (`acklab.orchestration.cli.common.ExitCode`). The commands live in
modules by job (experiments, catalog, docs, operations); this module registers them, in the order
`acklab --help` lists them."""

from __future__ import annotations

import signal
import sys

import typer

from acklab.orchestration.cli import catalog, docs, experiments, operations
from acklab.orchestration.cli.common import report_crash

app = typer.Typer(
    help="acklab: prove or refute Kafka delivery guarantees on real clusters.", no_args_is_help=True, pretty_exceptions_enable=False
)
for command in (
    operations.setup,
    experiments.run,
    catalog.presets,
    experiments.repro,
    experiments.explore,
    catalog.check_params,
    experiments.audit,
    catalog.check_topology,
    docs.model_table,
    docs.evidence_doc,
    docs.fault_catalog,
    docs.checks_doc,
    experiments.report,
    operations.reap,
):
    app.command()(command)
app.add_typer(operations.docker_app, name="docker")
app.add_typer(operations.airflow_app, name="airflow")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: every cluster, producer and fault of the run is undone on the way out


def main() -> None:
    """The `acklab` command; SIGTERM stops it like Ctrl-C, cleaning up what it started."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        app(prog_name="acklab")
    except Exception as exc:  # a crash outside a run's own handling: one line, its traceback in a file, its own exit code
        sys.exit(report_crash(exc, "acklab crashed"))
